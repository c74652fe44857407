"""Prefill GEMM: `linear` with many rows of x through the Llama-3.2-1B matrices, in TFLOP/s and as a fraction of
the f32 FMA peak measured in the same run (wgraph/bench/fma.py; the GEMM computes in f32 whatever the weight
dtype), beside torch's f32 (TF32 off: the FP32 ALUs) and f16 (tensor cores) matmul on the same data. With
`--variants all` every GEMM configuration of the registry that takes the shape is measured too (with the
K split its own rule picks, and unsplit where that rule splits): the A/B that tunes wgraph/shaders/registry/gemm.toml."""

from __future__ import annotations

import gc
import time

import attrs
import numpy as np

import wgraph as wg
from wgraph.bench.timing import time_calls
from wgraph.errors import WgraphError
from wgraph.kernels.registry import kernels_for

# (out_features, in_features) of Llama-3.2-1B's matrices: q/o, k/v, gate/up, down, lm_head
MATRICES_1B = ((2048, 2048), (512, 2048), (8192, 2048), (2048, 8192), (128256, 2048))


@attrs.frozen
class GemmShape:
    rows: int
    out_features: int
    in_features: int
    weight_dtype: str

    def label(self) -> str:
        return f"linear M={self.rows} W=[{self.out_features}, {self.in_features}] {self.weight_dtype}"

    @property
    def flops(self) -> int:
        return 2 * self.rows * self.out_features * self.in_features


def _grid(rows, matrices, dtypes=("f16", "f32")) -> tuple[GemmShape, ...]:
    return tuple(GemmShape(m, n, k, dt) for n, k in matrices for dt in dtypes for m in rows)


GEMM_GRIDS = {
    "tiny": _grid((9, 33), ((40, 36),)),
    "quick": _grid((37,), ((3072, 576),)),  # a 135M model's MLP layer for a 37-token prompt: lavapipe-sized
    "small": _grid((128, 512), ((2048, 2048), (8192, 2048))),
    "full": _grid((128, 512, 2048, 4096), MATRICES_1B),
    # the batched decode step's GEMMs (BatchedDecoder at 9..32 sequences: rows = sequences), f16 weights
    "decode": _grid((16, 32), MATRICES_1B, ("f16",)),
}
SAMPLE_ROWS, SAMPLE_COLS = 16, 512  # the float64 check reads this many rows and columns of y
WARM_S = 0.5  # busy seconds before the first measurement of new weights: the GPU idled while they were made


def configs(s: GemmShape, variants: str) -> list[tuple[str | None, int | None]]:
    """(variant, split_k) pairs to measure: the plan (None, None); with "all" also every GEMM configuration of
    the weight dtype that takes in_features, with its own K split and, where that splits, unsplit."""
    from wgraph.ops.dense import plan_linear

    planned = plan_linear(s.rows, s.out_features, s.in_features, s.weight_dtype, None)
    out, seen = [(None, None)], {(planned.variant, planned.splits)}
    if variants != "all":
        return out
    for kv in kernels_for("linear"):
        if (kv.facts.get("form") != "gemm" or kv.facts.get("weight_dtype") != s.weight_dtype
                or s.in_features % kv.limits["k_multiple"]):
            continue
        own = plan_linear(s.rows, s.out_features, s.in_features, s.weight_dtype, None, variant=kv.name)
        for split in ((None, 1) if own.splits > 1 else (None,)):
            key = (kv.name, own.splits if split is None else 1)
            if key not in seen:
                seen.add(key)
                out.append((kv.name, split))
    return out


def _torch_times(x: np.ndarray, w32: np.ndarray, target_s: float) -> dict:
    """torch F.linear on CUDA: f32 with TF32 off (the FP32 ALUs, as wgraph) and f16 (tensor cores)."""
    import torch
    import torch.nn.functional as F

    from wgraph.bench.torch_ref import cuda_time_ms

    res = {}
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for name, dt in (("f32", torch.float32), ("f16", torch.float16)):
            tx = torch.from_numpy(x).to("cuda").to(dt)
            tw = torch.from_numpy(w32).to("cuda").to(dt)
            call = lambda: F.linear(tx, tw)  # noqa: E731
            once = cuda_time_ms(call, 1)
            res[f"torch_{name}_us"] = cuda_time_ms(call, int(max(3, min(200, target_s * 1e3 / max(once, 1e-3))))) * 1e3
            del tx, tw
        torch.cuda.empty_cache()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return res


def _sampled_error(y, x: np.ndarray, w: np.ndarray, rng) -> float:
    """max |y - exact| / max |exact| over SAMPLE_ROWS rows and SAMPLE_COLS columns (exact: float64 of the stored
    operands); the rows are gathered on the GPU so a 2 GB y is not read back."""
    m, n = y.shape
    ri = np.sort(rng.choice(m, min(m, SAMPLE_ROWS), replace=False))
    ci = np.sort(rng.choice(n, min(n, SAMPLE_COLS), replace=False))
    got = wg.ops.embedding(ri, y).numpy()[:, ci].astype(np.float64)
    exact = x[ri].astype(np.float64) @ w[ci].astype(np.float64).T
    return float(np.max(np.abs(got - exact)) / max(float(np.max(np.abs(exact))), 1e-30))


def bench_gemm(dev, shapes, *, peak_tflops: float | None, variants: str = "planned", use_torch: bool = False,
               target_s: float = 0.1, max_reps: int = 100, budget_s: float = 420.0, progress=None) -> list[dict]:
    """One row per (shape, configuration): GPU µs per call, TFLOP/s, fraction of the f32 FMA peak, error
    against float64 on a sample, torch beside it. Shapes left when the budget is spent are rows "skipped"."""
    from wgraph.ops.dense import plan_linear

    rng = np.random.default_rng(0)
    rows, torch_cache = [], {}
    start = time.perf_counter()
    matrices = list(dict.fromkeys((s.out_features, s.in_features) for s in shapes))
    for n, k in matrices:
        group = [s for s in shapes if (s.out_features, s.in_features) == (n, k)]
        w32 = None
        for dt in dict.fromkeys(s.weight_dtype for s in group):
            tw = None
            for s in (s for s in group if s.weight_dtype == dt):
                base = {**attrs.asdict(s), "flops": s.flops, "status": "ok", "note": ""}
                if time.perf_counter() - start > budget_s:
                    rows.append({**base, "status": "skipped", "note": f"time budget of {budget_s:.0f} s spent"})
                    continue
                try:
                    if w32 is None:
                        w32 = rng.standard_normal((n, k), dtype=np.float32)
                        w32 *= k ** -0.5
                    if tw is None:
                        w = w32.astype(np.float16) if dt == "f16" else w32
                        tw, idle = dev.tensor(w), True
                    x = rng.standard_normal((s.rows, k), dtype=np.float32)
                    tx, y = dev.tensor(x), dev.empty((s.rows, n), "f32")
                    if use_torch and (s.rows, n, k) not in torch_cache:
                        try:
                            torch_cache[(s.rows, n, k)] = _torch_times(x, w32, target_s)
                        except Exception as e:  # noqa: BLE001 - the reference failing is a note, not the end
                            torch_cache[(s.rows, n, k)] = {"torch_note": f"{type(e).__name__}: {e}"}
                        idle = True
                    tt = torch_cache.get((s.rows, n, k), {})
                except (WgraphError, MemoryError) as e:
                    rows.append({**base, "status": "unsupported", "note": f"{type(e).__name__}: {e}"})
                    continue
                for variant, split in configs(s, variants):
                    row = {**base, "config": "planned" if variant is None else f"{variant} split_k={split or 'own'}",
                           "planned": variant is None}
                    try:
                        plan = plan_linear(s.rows, n, k, dt, dev.caps, variant=variant, split_k=split)
                        row.update(variant=plan.variant, splits=plan.splits, reason=plan.reason)
                        call = lambda: wg.ops.linear(tx, tw, variant=variant, split_k=split, out=y)  # noqa: E731
                        call()
                        row["max_rel_err_vs_float64"] = _sampled_error(y, x, w, rng)
                        us, reps, source = time_calls(dev, call, target_s, max_reps, WARM_S if idle else 0.0)
                        idle = False
                        row.update(gpu_us=us, reps=reps, time_source=source, tflops=s.flops / (us * 1e-6) / 1e12)
                        if peak_tflops:
                            row["fraction_of_fma_peak"] = row["tflops"] / peak_tflops
                        if "torch_note" in tt:
                            row["torch_note"] = tt["torch_note"]
                        for name in ("f32", "f16"):
                            if f"torch_{name}_us" in tt:
                                row[f"torch_{name}_us"] = tt[f"torch_{name}_us"]
                                row[f"torch_{name}_tflops"] = s.flops / (tt[f"torch_{name}_us"] * 1e-6) / 1e12
                                row[f"ratio_to_torch_{name}"] = tt[f"torch_{name}_us"] / us
                    except (WgraphError, MemoryError) as e:
                        row.update(status="unsupported", note=f"{type(e).__name__}: {e}")
                    except Exception as e:  # noqa: BLE001 - one failing shape must not end the run
                        row.update(status="error", note=f"{type(e).__name__}: {e}")
                    rows.append(row)
                    if progress:
                        progress(f"[{len(rows):3d}] {s.label():42} {row.get('config', ''):38} " + (
                            f"{row['tflops']:.4g} TFLOP/s" + (f" ({row['fraction_of_fma_peak']:.2f} of FMA peak)"
                                                              if "fraction_of_fma_peak" in row else "")
                            + (f"  torch f32 {row['torch_f32_tflops']:.4g}" if "torch_f32_tflops" in row else "")
                            if row["status"] == "ok" else f"{row['status']}: {row['note'][:80]}"))
                del tx, y
                gc.collect()
            del tw
            gc.collect()
    return rows


def _f(x, fmt: str) -> str:
    return format("-", f">{fmt.split('.')[0]}") if x is None else format(x, fmt)


def table(rows: list[dict], peak_tflops: float | None) -> str:
    """The planned rows beside torch; then, where configurations were compared, each shape's ranking."""
    peak = f"{peak_tflops:.4g} TFLOP/s" if peak_tflops else "not measured"
    head = (f"{'M':>5} {'out':>7} {'in':>5} {'W':4} {'variant':26} {'split':>5} {'gpu us':>9} {'TFLOP/s':>8} "
            f"{'of peak':>7} {'torch f32':>9} {'torch f16':>9} {'rel err':>8}")
    lines = [f"f32 FMA peak: {peak}", head, "-" * len(head)]
    for r in rows:
        if "config" in r and not r["planned"]:
            continue
        shape = f"{r['rows']:5d} {r['out_features']:7d} {r['in_features']:5d} {r['weight_dtype']:4}"
        if r["status"] != "ok":
            lines.append(f"{shape} {r['status']}: {r['note'][:90]}")
            continue
        lines.append(f"{shape} {r['variant']:26} {r['splits']:5d} {r['gpu_us']:9.1f} {r['tflops']:8.4g} "
                     f"{_f(r.get('fraction_of_fma_peak'), '7.3f')} {_f(r.get('torch_f32_tflops'), '9.4g')} "
                     f"{_f(r.get('torch_f16_tflops'), '9.4g')} {r['max_rel_err_vs_float64']:8.2g}")
    lines.append("TFLOP/s: 2*M*out*in / GPU time per call; of peak: of the f32 FMA peak (the GEMM computes in f32); "
                 "torch: F.linear TFLOP/s, f32 with TF32 off, f16 on tensor cores; rel err: against float64 on a "
                 "sample of y.")
    ab = [r for r in rows if r["status"] == "ok" and not r.get("planned")]
    if ab:
        lines += ["", "configurations (fastest first; * = the planner's pick):"]
        keys = dict.fromkeys((r["weight_dtype"], r["out_features"], r["in_features"], r["rows"]) for r in rows)
        for key in keys:
            same = [r for r in rows if r["status"] == "ok"
                    and (r["weight_dtype"], r["out_features"], r["in_features"], r["rows"]) == key]
            if len(same) < 2:
                continue
            plan = next((r for r in same if r.get("planned")), None)
            others = sorted((r for r in same if not r.get("planned")), key=lambda r: -r["tflops"])
            if plan is not None:
                others = [r for r in others if (r["variant"], r["splits"]) != (plan["variant"], plan["splits"])]
                others = sorted([plan, *others], key=lambda r: -r["tflops"])
            cells = [f"{'*' if r.get('planned') else ''}{r['variant'].replace('linear_gemm_', '')}/{r['splits']} "
                     f"{r['tflops']:.3g}" for r in others]
            lines.append(f"{key[3]:5d} {key[1]:7d} {key[2]:5d} {key[0]:4} " + ", ".join(cells))
        lines.append("variant/splits TFLOP/s; tune min_tiles / fill_workgroups in wgraph/shaders/registry/gemm.toml.")
    return "\n".join(lines)
