"""`python -m wgraph bench --only quant`: the GEMV that reads GGML blocks (wgraph/ops/quantized.py) on every
matrix shape of Llama-3.2-1B, as GB/s on the bytes it reads (blocks + x + y) and as a fraction of the copy
kernel's bandwidth in the same run; for Q4_0 and Q4_K every GEMV variant of the format (the tuning candidates
too) beside the planned one; torch's f16 GEMV on the same shape beside it. Then the 1B-shape greedy decode with
Q4_0, Q4_K and Q8_0 weights (quantized from the f16 model's weights by the `gguf` package's quantizer; Q4_K by
wgraph.ggml_blocks.quantize_q4_k) beside the same model in f16, in wgraph and in torch (eager, CUDA graphs).
On a CPU adapter or with --quick: small shapes and a tiny model."""

from __future__ import annotations

import gc
import os
import statistics
import time

import attrs
import numpy as np

import wgraph as wg
from wgraph.bench.gemv import CACHE_BYTES
from wgraph.bench.timing import time_calls
from wgraph.errors import WgraphError
from wgraph.ggml_blocks import FORMATS, QuantizedWeight, quantize
from wgraph.kernels.registry import kernels_for
from wgraph.ops.quantized import plan_linear_q

TYPES = ("Q4_0", "Q4_K", "Q8_0", "Q4_1")
ALL_VARIANTS = ("Q4_0", "Q4_K")  # formats whose tuning candidates are measured too
MODEL_TYPES = ("Q4_0", "Q4_K", "Q8_0")
MAX_COPIES = 512

# Llama-3.2-1B: hidden 2048, intermediate 8192, 32 q / 8 kv heads of 64, vocab 128256 (tied embedding)
LLAMA_1B_MATRICES = {"q_proj, o_proj": (2048, 2048), "k_proj, v_proj": (512, 2048), "gate_proj, up_proj": (8192, 2048),
                     "gate+up stacked": (16384, 2048), "down_proj": (2048, 8192), "lm_head (tied)": (128256, 2048)}
SMALL_MATRICES = {"small": (64, 256), "wide": (96, 512)}


@attrs.frozen
class QuantGemvShape:
    ggml_type: str
    rows: int
    out_features: int
    in_features: int
    matrix: str

    @property
    def weight_bytes(self) -> int:
        return FORMATS[self.ggml_type].nbytes(self.out_features, self.in_features)

    @property
    def bytes(self) -> int:
        """The blocks once, x and y (f32)."""
        return self.weight_bytes + 4 * self.rows * (self.in_features + self.out_features)


def random_blocks(ggml_type: str, n: int, k: int, rng) -> QuantizedWeight:
    """Valid blocks of random quants with scales near 0.01 (a GEMV's speed does not depend on the values;
    quantizing a 128256 x 2048 matrix would take the bench longer than timing it)."""
    fmt = FORMATS[ggml_type]
    raw = rng.integers(0, 256, size=(n * (k // fmt.block_weights), fmt.block_bytes), dtype=np.uint8)
    halves = 2 if ggml_type in ("Q4_1", "Q4_K") else 1  # d (and m or dmin) lead every block
    scales = rng.uniform(0.002, 0.02, size=(raw.shape[0], halves)).astype(np.float16)
    if ggml_type == "Q4_1":
        scales[:, 1] *= -8  # the min: centres the 0..15 quants
    raw[:, :2 * halves] = scales.view(np.uint8)
    return QuantizedWeight.from_bytes(ggml_type, (n, k), raw)


def _check_rows(got: np.ndarray, x: np.ndarray, qw: QuantizedWeight, limit: int = 512) -> float:
    """Relative max error of the first `limit` outputs against float64 with gguf's dequantized weights."""
    rows = min(qw.out_features, limit)
    part = QuantizedWeight.from_bytes(qw.ggml_type, (rows, qw.in_features), qw.raw()[:rows])
    exact = x.astype(np.float64) @ part.dequantize().astype(np.float64).T
    return float(np.max(np.abs(got[:, :rows] - exact)) / max(np.max(np.abs(exact)), 1e-30))


def _torch_gemv_us(rows: int, n: int, k: int, copies: int, reps: int) -> float:
    """torch.nn.functional.linear with f16 weights [n, k] (CUDA events, median of 3 loops over `copies`)."""
    import torch
    import torch.nn.functional as F

    ws = [torch.randn(n, k, device="cuda", dtype=torch.float16) * 0.02 for _ in range(copies)]
    x = torch.randn(rows, k, device="cuda", dtype=torch.float16)
    for w in ws:
        F.linear(x, w)
    torch.cuda.synchronize()
    times = []
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(reps):
            F.linear(x, ws[i % copies])
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / reps * 1e3)
    del ws, x
    torch.cuda.empty_cache()
    return statistics.median(times)


def gemv_shapes(big: bool) -> list[QuantGemvShape]:
    mats = LLAMA_1B_MATRICES if big else SMALL_MATRICES
    out = [QuantGemvShape(t, 1, n, k, name) for t in TYPES for name, (n, k) in mats.items()]
    eight = ("gate_proj, up_proj", "down_proj") if big else ("small",)
    out += [QuantGemvShape(t, 8, *mats[name], name) for t in ("Q4_0", "Q4_K") for name in eight]
    return out


def _variants(s: QuantGemvShape, all_variants: bool) -> list[str]:
    planned = plan_linear_q(s.rows, s.out_features, s.in_features, s.ggml_type).variant
    if not (all_variants and s.ggml_type in ALL_VARIANTS and s.rows == 1):
        return [planned]
    others = [kv.name for kv in kernels_for("linear_q") if kv.facts["ggml_type"] == s.ggml_type
              and kv.limits["max_rows"] == 1 and kv.name != planned]
    return [planned, *others]


def bench_quant_gemv(dev, shapes, *, copy_gbps: float | None, all_variants: bool, use_torch: bool,
                     target_s: float, progress) -> list[dict]:
    """One row per (shape, variant): GPU µs per call, GB/s on the bytes read, fraction of the copy bandwidth;
    the planned variant's row also times calls that write distinct outputs (no dependency between them) and
    torch's f16 GEMV. On a GPU, calls cycle over copies of W that do not fit its last-level cache; on a CPU
    adapter over one (its caches are the machine's, and hundreds of copies would only churn the buffer pool)."""
    rng = np.random.default_rng(0)
    rows = []
    for i, s in enumerate(shapes):
        base = {**attrs.asdict(s), "weight_bytes": s.weight_bytes, "bytes": s.bytes}
        try:
            qw = random_blocks(s.ggml_type, s.out_features, s.in_features, rng)
            copies = 1 if dev.caps.is_cpu else max(1, min(MAX_COPIES, -(-CACHE_BYTES // s.weight_bytes)))
            tws = [qw.upload(dev) for _ in range(copies)]
            x = rng.standard_normal((s.rows, s.in_features), dtype=np.float32)
            tx = dev.tensor(x)
            ys = [dev.empty((s.rows, s.out_features), "f32") for _ in range(min(copies, 64))]
        except (WgraphError, MemoryError) as e:
            rows.append({**base, "status": "unsupported", "note": f"{type(e).__name__}: {e}"})
            continue
        except Exception as e:  # noqa: BLE001 - an allocation the GPU refuses must not end the run
            rows.append({**base, "status": "error", "note": f"{type(e).__name__}: {e}"})
            continue
        torch_us = None
        for v in _variants(s, all_variants):
            planned = v == plan_linear_q(s.rows, s.out_features, s.in_features, s.ggml_type).variant
            row = {**base, "variant": v, "planned": planned, "weight_copies": copies, "status": "ok", "note": ""}
            try:
                state = {"i": 0}

                def call(distinct=False):
                    j = state["i"]
                    wg.ops.linear_q(tx, tws[j % copies], out=ys[j % len(ys)] if distinct else ys[0], variant=v)
                    state["i"] = j + 1

                call()
                row["max_rel_err_vs_float64"] = _check_rows(ys[0].numpy(), x, qw)
                # the shape's first variant warms the GPU's clocks up; the next ones find them up
                us, reps, source = time_calls(dev, call, target_s, 400, warm_s=0.3 if planned else 0.05)
                row.update(gpu_us=us, reps=reps, time_source=source, gbps=s.bytes / (us * 1e-6) / 1e9,
                           reason=plan_linear_q(s.rows, s.out_features, s.in_features, s.ggml_type, v).reason)
                if copy_gbps:
                    row["fraction_of_copy"] = row["gbps"] / copy_gbps
                if planned:
                    us2, _, _ = time_calls(dev, lambda: call(True), target_s, 400)
                    row.update(distinct_outputs_gpu_us=us2, distinct_outputs_gbps=s.bytes / (us2 * 1e-6) / 1e9)
                    if use_torch:
                        torch_us = torch_us or _torch_gemv_us(s.rows, s.out_features, s.in_features,
                                                              max(1, min(8, -(-CACHE_BYTES // (2 * s.out_features
                                                                                                * s.in_features)))),
                                                              max(reps, 20))
                        f16_bytes = 2 * s.out_features * s.in_features + 4 * s.rows * (s.in_features + s.out_features)
                        row.update(torch_f16_us=torch_us, torch_f16_gbps=f16_bytes / (torch_us * 1e-6) / 1e9,
                                   speedup_vs_torch_f16=torch_us / us)
            except (WgraphError, MemoryError) as e:
                row.update(status="unsupported", note=f"{type(e).__name__}: {e}")
            except Exception as e:  # noqa: BLE001 - one failing shape must not end the run
                row.update(status="error", note=f"{type(e).__name__}: {e}")
            rows.append(row)
            progress(f"[{i + 1:3d}/{len(shapes)}] {s.ggml_type} M={s.rows} [{s.out_features}, {s.in_features}] "
                     f"{v:28} " + (f"{row['gbps']:.4g} GB/s" + (f" ({row['fraction_of_copy']:.2f} of copy)"
                                                                 if "fraction_of_copy" in row else "")
                                   if row["status"] == "ok" else f"{row['status']}: {row['note'][:80]}"))
        del tws, ys
        gc.collect()
    return rows


def dispatch_floor(dev, target_s: float) -> dict:
    """GPU time per call of a quantized GEMV too small to matter (M=1, [8, 256] Q4_0): what every call pays."""
    qw = random_blocks("Q4_0", 8, 256, np.random.default_rng(1)).upload(dev)
    x, y = dev.tensor(np.ones((1, 256), np.float32)), dev.empty((1, 8), "f32")
    us, reps, source = time_calls(dev, lambda: wg.ops.linear_q(x, qw, out=y), target_s, 2000)
    return {"shape": [8, 256], "ggml_type": "Q4_0", "gpu_us": us, "reps": reps, "time_source": source}


# ---- the decode rows ----

def _quantize_rows(a: np.ndarray, ggml_type: str) -> np.ndarray:
    """Raw blocks of float rows (a process pool's task: module level, so a spawned worker can import it)."""
    return quantize(np.asarray(a, np.float32), ggml_type).raw()


def quantize_weights(weights: dict, ggml_type: str, workers: int, chunk_rows: int = 4096) -> dict:
    """Every matrix of an HF-named dict quantized (wgraph.ggml_blocks.quantize), row chunks spread over
    `workers` spawned processes (numpy's quantizers are single-threaded; 1.24 B weights take a minute alone)."""
    jobs = [(name, r) for name, a in weights.items() if np.ndim(a) == 2 for r in range(0, a.shape[0], chunk_rows)]
    parts: dict = {}
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as ex:
            futures = {job: ex.submit(_quantize_rows, weights[job[0]][job[1]:job[1] + chunk_rows], ggml_type)
                       for job in jobs}
            parts = {job: f.result() for job, f in futures.items()}
    else:
        parts = {job: _quantize_rows(weights[job[0]][job[1]:job[1] + chunk_rows], ggml_type) for job in jobs}
    out = {}
    for name, a in weights.items():
        if np.ndim(a) != 2:
            out[name] = a
            continue
        raw = np.concatenate([parts[(name, r)] for r in range(0, a.shape[0], chunk_rows)], axis=0)
        out[name] = QuantizedWeight.from_bytes(ggml_type, tuple(a.shape), raw)
    return out


def _decode_row(dev, model, *, label: str, steps: int, prompt: list, copy_gbps: float | None) -> dict:
    """Greedy decode rate of a loaded model: `steps` tokens submitted back to back after a warm-up."""
    model.generate(prompt, steps + 1, in_flight=8)  # warm-up: pipelines, clocks
    model.prefill(prompt)
    dev.sync()
    t0 = time.perf_counter()
    host = model.run_steps(steps, in_flight=8)
    dev.sync()
    dt = (time.perf_counter() - t0) / steps
    per_token = model.weight_bytes_per_token
    return {"model": label, "status": "ok", "note": "", "weight_bytes_per_token": per_token,
            "dispatches_per_token": len(model.program.rows), "ms_per_token": dt * 1e3, "tokens_per_s": 1.0 / dt,
            "host_ms_per_token": host / steps * 1e3, "weight_gbps": per_token / dt / 1e9,
            "fraction_of_copy_bandwidth": per_token / dt / 1e9 / copy_gbps if copy_gbps else None}


def bench_quant_models(dev, *, big: bool, copy_gbps: float | None, use_torch: bool, progress) -> list[dict]:
    """The 1B-shape (or, on a CPU adapter, a tiny) Llama decode: f16 wgraph, each quantized format, torch f16."""
    from wgraph.bench.model import LLAMA_1B, TINY, SeededLlama, seeded_host_weights, torch_weights
    from wgraph.models import LlamaConfig
    from wgraph.models.quantized import QuantizedLlama

    cfg = LlamaConfig.from_dict(LLAMA_1B if big else dict(TINY, hidden_size=256, intermediate_size=512, head_dim=64))
    steps, max_seq, prompt = (128, 512, [1]) if big else (16, 64, [1])
    progress(f"quant models: seeded weights ({cfg.num_hidden_layers} layers, hidden {cfg.hidden_size})")
    weights = seeded_host_weights(cfg)  # the values SeededLlama and torch_weights make on the GPU
    rows = []
    dtype = "f16" if dev.caps.has_f16 else "f32"
    model = SeededLlama(cfg, dev, dtype=dtype, max_seq=max_seq)
    f16 = _decode_row(dev, model, label=f"wgraph {dtype}", steps=steps, prompt=prompt, copy_gbps=copy_gbps)
    rows.append(f16)
    del model
    gc.collect()
    workers = min(16, os.cpu_count() or 1) if big else 1
    for t in MODEL_TYPES:
        row: dict = {"model": f"wgraph {t}", "status": "ok", "note": ""}
        try:
            t0 = time.perf_counter()
            progress(f"quant models: quantizing to {t} ({workers} processes)")
            q = quantize_weights(weights, t, workers)
            quantize_s = time.perf_counter() - t0
            model = QuantizedLlama.from_weights(cfg, q, dev, max_seq=max_seq)
            progress(f"quant models: decoding {steps} tokens with {t} weights")
            row = _decode_row(dev, model, label=f"wgraph {t}", steps=steps, prompt=prompt, copy_gbps=copy_gbps)
            row.update(quantize_s=quantize_s, speedup_vs_wgraph_f16=row["tokens_per_s"] / f16["tokens_per_s"])
            del model, q
        except (WgraphError, MemoryError) as e:
            row.update(status="unsupported", note=f"{type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - one failing row must not end the run
            row.update(status="error", note=f"{type(e).__name__}: {e}")
        rows.append(row)
        gc.collect()
    if use_torch:
        from wgraph.bench.torch_ref import probe

        info = probe()
        if info.get("available"):
            from wgraph.bench.torch_llama import bench_torch_decode

            progress("quant models: torch f16 eager and CUDA graph decode")
            try:
                timed = bench_torch_decode(cfg, torch_weights(cfg), max_seq=max_seq, start_token=prompt[0], start_pos=0,
                                           steps=steps)
                for mode, r in timed.items():
                    rows.append({"model": f"torch f16 {mode}", "status": "ok", "note": "",
                                 "ms_per_token": r["ms_per_token"], "tokens_per_s": 1e3 / r["ms_per_token"],
                                 "weight_bytes_per_token": f16["weight_bytes_per_token"]})
            except Exception as e:  # noqa: BLE001 - the reference must not take the bench down
                rows.append({"model": "torch f16", "status": "error", "note": f"{type(e).__name__}: {e}"})
        else:
            rows.append({"model": "torch f16", "status": "unavailable", "note": info.get("note", "")})
    return rows


def gemv_table(copy: dict, floor: dict, rows: list[dict]) -> str:
    lines = [f"copy kernel: {copy['gbps']:.4g} GB/s; dispatch floor: {floor['gpu_us']:.2f} us per call of a "
             f"[8, 256] Q4_0 GEMV"]
    head = (f"{'type':4} {'M':>2} {'out':>7} {'in':>5} {'variant':28} {'gpu us':>8} {'GB/s':>7} {'of copy':>7} "
            f"{'indep us':>8} {'torch f16 us':>12}")
    lines += [head, "-" * len(head)]
    for r in rows:
        shape = f"{r['ggml_type']:4} {r['rows']:2d} {r['out_features']:7d} {r['in_features']:5d}"
        if r["status"] != "ok":
            lines.append(f"{shape} {r.get('variant', ''):28} {r['status']}: {r['note'][:80]}")
            continue
        mark = "*" if r["planned"] else " "
        frac = f"{r['fraction_of_copy']:7.3f}" if r.get("fraction_of_copy") else f"{'-':>7}"
        indep = f"{r['distinct_outputs_gpu_us']:8.2f}" if "distinct_outputs_gpu_us" in r else f"{'':8}"
        torch_us = f"{r['torch_f16_us']:12.2f}" if "torch_f16_us" in r else f"{'':12}"
        lines.append(f"{shape} {r['variant'] + mark:28} {r['gpu_us']:8.2f} {r['gbps']:7.4g} {frac} {indep} {torch_us}")
    lines.append("GB/s: (blocks + x + y bytes) / GPU time per call, calls writing one output (each waits for the "
                 "last); * planned; indep us: the planned kernel with distinct outputs (calls may overlap)")
    return "\n".join(lines)


def model_table(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        if r.get("status") != "ok":
            lines.append(f"  {r['model']:22} {r['status']}: {r.get('note', '')[:100]}")
            continue
        extra = ""
        if r.get("fraction_of_copy_bandwidth"):
            extra += (f"  {r['weight_bytes_per_token'] / 1e6:8.1f} MB/token  {r['weight_gbps']:7.1f} GB/s = "
                      f"{r['fraction_of_copy_bandwidth']:.1%} of copy  [{r['dispatches_per_token']} dispatches]")
        if "speedup_vs_wgraph_f16" in r:
            extra += f"  {r['speedup_vs_wgraph_f16']:.2f}x wgraph f16"
        lines.append(f"  {r['model']:22} {r['tokens_per_s']:9.1f} tokens/s {r['ms_per_token']:8.3f} ms/token{extra}")
    return "\n".join(lines)
