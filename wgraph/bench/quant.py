"""`python -m wgraph bench --only quant`: the GEMV that reads GGML blocks (wgraph/ops/quantized.py) on every
call the Llama-3.2-1B decode step makes (with its fused options: norm + [q; k; v], o_proj + residual, norm +
[gate; up] + swiglu, down_proj + residual, norm + lm_head), as GB/s on the bytes it reads (blocks + x + y + norm
weight + residual) and as a fraction of the copy kernel's bandwidth in the same run; for Q4_0 and Q4_K every
GEMV variant of the format the device runs (the tuning candidates too) beside the planned one; torch's f16 GEMV
on the same shape beside it. Then the 1B-shape greedy decode with Q4_0, Q4_K, Q8_0 and IQ4_XS weights and
llama.cpp's file types Q4_K_M, Q5_K_M and Q3_K_M (wgraph/models/file_types.py: Q6_K for the tied table, some
v_proj / down_proj / o_proj raised), quantized from the f16 model's weights by the `gguf` package's quantizer
(the K-quants and IQ4s by wgraph.ggml_blocks' own), beside
the same model in f16, in wgraph (tokens/s, host and GPU time per step, GPU time by op) and in torch (eager,
CUDA graphs). On a CPU adapter or with --quick: small shapes (QUICK_TYPES) and a tiny model (QUICK_MODEL_TYPES)."""

from __future__ import annotations

import gc
import os
import statistics
import time

import attrs
import numpy as np

import wgraph as wg
from wgraph.bench import timing, torch_ref
from wgraph.bench.gemv import CACHE_BYTES, ceiling_fields
from wgraph.bench.timing import time_calls
from wgraph.errors import WgraphError
from wgraph.ggml_blocks import FORMATS, QuantizedWeight, quantize
from wgraph.kernels.registry import kernel, kernels_for
from wgraph.ops.quantized import plan_linear_q

TYPES = ("Q4_0", "Q4_K", "Q8_0", "Q4_1", "Q5_0", "Q5_1", "Q5_K", "Q6_K", "Q3_K", "Q2_K", "IQ4_NL", "IQ4_XS", "IQ2_XXS",
         "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M")
QUICK_TYPES = ("Q4_0", "Q4_K", "IQ4_XS")  # the small shapes (--quick, a CPU adapter): a smoke run of three readers
ALL_VARIANTS = ("Q4_0", "Q4_K")  # formats whose tuning candidates are measured too
MODEL_TYPES = ("Q4_0", "Q4_K", "Q4_K_M", "Q5_K_M", "Q3_K_M", "IQ4_XS", "Q8_0")  # block formats, llama.cpp's file types
QUICK_MODEL_TYPES = ("Q4_0", "Q4_K_M")  # the tiny model (--quick, a CPU adapter): a block format and a mixture
# also decoded with x_int8 (QuantizedLlama's option, docs/quantized.md): x rounded to int8 for the GEMVs where the
# integer dots are faster (Q4_0's, Q4_1's and Q5_K's wide outputs: the lm_head and gate+up)
MODEL_X_INT8 = ("Q4_0", "Q5_K_M")
QUICK_MODEL_X_INT8 = ("Q4_0",)
MAX_COPIES = 512

# The GEMVs of a Llama-3.2-1B decode step (hidden 2048, intermediate 8192, 32 q / 8 kv heads of 64, vocab 128256,
# tied embedding), as the step calls them: label -> (out_features, in_features, norm, swiglu, residual)
LLAMA_1B_CALLS = {"norm+qkv": (3072, 2048, True, False, False), "o_proj+residual": (2048, 2048, False, False, True),
                  "norm+gate_up+swiglu": (16384, 2048, True, True, False),
                  "down_proj+residual": (2048, 8192, False, False, True), "norm+lm_head": (128256, 2048, True, False, False)}
LLAMA_1B_MULTI_ROW = {"gate_proj": (8192, 2048, False, False, False), "down_proj": (2048, 8192, False, False, False)}
SMALL_CALLS = {"norm+small": (64, 256, True, False, False), "wide+swiglu+residual": (96, 512, False, True, True)}


@attrs.frozen
class QuantGemvShape:
    ggml_type: str
    rows: int
    out_features: int
    in_features: int
    matrix: str
    norm: bool = False
    swiglu: bool = False
    residual: bool = False

    @property
    def weight_bytes(self) -> int:
        return FORMATS[self.ggml_type].nbytes(self.out_features, self.in_features)

    @property
    def outputs(self) -> int:
        return self.out_features // 2 if self.swiglu else self.out_features

    @property
    def bytes(self) -> int:
        """The blocks once, x and y (f32), the norm weight and the residual (f32) when fused."""
        return (self.weight_bytes + 4 * self.rows * (self.in_features + self.outputs * (1 + self.residual))
                + 4 * self.in_features * self.norm)

    @property
    def fused(self) -> tuple[str, ...]:
        return tuple(name for name, on in (("rmsnorm", self.norm), ("swiglu", self.swiglu),
                                            ("residual", self.residual)) if on)


def random_blocks(ggml_type: str, n: int, k: int, rng) -> QuantizedWeight:
    """Valid blocks of random quants with scales near 0.01 (a GEMV's speed does not depend on the values;
    quantizing a 128256 x 2048 matrix would take the bench longer than timing it)."""
    fmt = FORMATS[ggml_type]
    raw = rng.integers(0, 256, size=(n * (k // fmt.block_weights), fmt.block_bytes), dtype=np.uint8)
    scales = rng.uniform(0.002, 0.02, size=(raw.shape[0], fmt.halves)).astype(np.float16)  # d (and m or dmin)
    if ggml_type in ("Q4_1", "Q5_1"):
        scales[:, 1] *= -8  # the min: centres the quants (0..15; Q5_1's 0..31 near enough)
    if ggml_type in ("Q3_K", "Q6_K", "IQ4_XS"):  # d times signed sub-block scales: weights < ~1.3
        scales /= np.float16({"Q3_K": 4, "Q6_K": 128, "IQ4_XS": 64}[ggml_type])
    if ggml_type == "IQ1_M":   # d's 16 bits are the top nibbles of the 4 scale words (bytes 49, 51, 53, 55)
        bits = scales[:, 0].view(np.uint16)
        for i in range(4):
            raw[:, 49 + 2 * i] = (raw[:, 49 + 2 * i] & 0x0F) | (((bits >> (4 * i)) & 15) << 4).astype(np.uint8)
    else:
        raw[:, fmt.halves_at:fmt.halves_at + 2 * fmt.halves] = scales.view(np.uint8)
    return QuantizedWeight.from_bytes(ggml_type, (n, k), raw)


def _check_rows(got: np.ndarray, x: np.ndarray, qw: QuantizedWeight, s: QuantGemvShape, norm, residual,
                limit: int = 512) -> float:
    """Relative max error of the first `limit` outputs against float64 with gguf's dequantized weights."""
    outs = min(s.outputs, limit)
    rows = np.r_[0:outs, s.outputs:s.outputs + outs] if s.swiglu else np.r_[0:outs]
    part = QuantizedWeight.from_bytes(qw.ggml_type, (rows.size, qw.in_features), qw.raw()[rows])
    xs = x.astype(np.float64)
    if norm is not None:
        xs = xs / np.sqrt(np.mean(xs * xs, -1, keepdims=True) + 1e-5) * norm
    exact = xs @ part.dequantize().astype(np.float64).T
    if s.swiglu:
        gate, up = exact[:, :outs], exact[:, outs:]
        with np.errstate(over="ignore"):  # exp(-gate) = inf for a very negative gate: silu(gate) is then -0
            exact = gate / (1 + np.exp(-gate)) * up
    if residual is not None:
        exact = exact + residual[:, :outs]
    return float(np.max(np.abs(got[:, :outs] - exact)) / max(np.max(np.abs(exact)), 1e-30))


def _torch_gemv_us(rows: int, n: int, k: int, copies: int, reps: int) -> float:
    """torch.nn.functional.linear with f16 weights [n, k] (CUDA events, median of 3 loops over `copies`)."""
    import torch

    ws = [torch.randn(n, k, device="cuda", dtype=torch.float16) * 0.02 for _ in range(copies)]
    x = torch.randn(rows, k, device="cuda", dtype=torch.float16)
    us = torch_ref.cycled_linear_us(x, ws, reps)
    del ws, x
    torch.cuda.empty_cache()
    return us


def gemv_shapes(big: bool) -> list[QuantGemvShape]:
    calls = LLAMA_1B_CALLS if big else SMALL_CALLS
    out = [QuantGemvShape(t, 1, n, k, name, *opts) for t in (TYPES if big else QUICK_TYPES)
           for name, (n, k, *opts) in calls.items()]
    multi = LLAMA_1B_MULTI_ROW if big else {"small": (64, 256, False, False, False)}
    out += [QuantGemvShape(t, 8, n, k, name, *opts) for t in ("Q4_0", "Q4_K") for name, (n, k, *opts) in multi.items()]
    return out


def _plan(dev, s: QuantGemvShape, variant: str | None = None):
    return plan_linear_q(s.rows, s.out_features, s.in_features, s.ggml_type, variant, swiglu=s.swiglu, fused=s.fused,
                         caps=dev.caps)


def _variants(dev, s: QuantGemvShape, all_variants: bool) -> list[str]:
    """The planned GEMV, then (for Q4_0 and Q4_K) every other variant of the format and of the planned one's class
    (one row of x, or 2-8) the device runs, tuning candidates and x_int8 ones included; on a device with subgroups
    not the variants for devices without them."""
    planned = _plan(dev, s).variant
    if not (all_variants and s.ggml_type in ALL_VARIANTS):
        return [planned]
    rows_class = kernel(planned).limits["max_rows"]
    others = [kv.name for kv in kernels_for("linear_q") if kv.facts["ggml_type"] == s.ggml_type
              and kv.limits["max_rows"] == rows_class and kv.name != planned and set(kv.features) <= dev.caps.features
              and ("subgroup" in kv.features or not dev.caps.has_subgroups)]
    return [planned, *others]


def bench_quant_gemv(dev, shapes, *, copy_gbps: float | None, all_variants: bool, use_torch: bool,
                     target_s: float, progress, variants: list[str] | None = None) -> list[dict]:
    """One row per (shape, variant): GPU µs per call, GB/s on the bytes read, fraction of the copy bandwidth;
    the planned variant's row also times calls that write distinct outputs (no dependency between them) and
    torch's f16 GEMV. On a GPU, calls cycle over copies of W that do not fit its last-level cache; on a CPU
    adapter over one (its caches are the machine's, and hundreds of copies would only churn the buffer pool).
    `variants`: these GEMVs (registry names) on every shape instead of the planned one and the candidates; a
    `compute_only` kernel (benchmarks/quant_ab.py's bound: no weight loads) is timed but not checked."""
    rng = np.random.default_rng(0)
    rows = []
    for i, s in enumerate(shapes):
        base = {**attrs.asdict(s), "weight_bytes": s.weight_bytes, "bytes": s.bytes}
        try:
            qw = random_blocks(s.ggml_type, s.out_features, s.in_features, rng)
            copies = 1 if dev.caps.is_cpu else max(1, min(MAX_COPIES, -(-CACHE_BYTES // s.weight_bytes)))
            tws = [qw.upload(dev) for _ in range(copies)]
            x = rng.standard_normal((s.rows, s.in_features), dtype=np.float32)
            norm = (1 + 0.1 * rng.standard_normal(s.in_features)).astype(np.float32) if s.norm else None
            residual = rng.standard_normal((s.rows, s.outputs), dtype=np.float32) if s.residual else None
            tx, tnorm = dev.tensor(x), None if norm is None else dev.tensor(norm)
            tres = None if residual is None else dev.tensor(residual)
            # at least 8 outputs: the distinct-outputs timing needs calls that do not wait for each other, also
            # where the weight is one copy (a CPU adapter) or two (the 1B lm_head)
            ys = [dev.empty((s.rows, s.outputs), "f32") for _ in range(min(max(copies, 8), 64))]
        except (WgraphError, MemoryError) as e:
            rows.append({**base, "status": "unsupported", "note": f"{type(e).__name__}: {e}"})
            continue
        except Exception as e:  # noqa: BLE001 - an allocation the GPU refuses must not end the run
            rows.append({**base, "status": "error", "note": f"{type(e).__name__}: {e}"})
            continue
        torch_us = None
        planned_name = _plan(dev, s).variant
        for v in _variants(dev, s, all_variants) if variants is None else variants:
            planned = v == planned_name
            row = {**base, "variant": v, "planned": planned, "weight_copies": copies, "status": "ok", "note": ""}
            try:
                row["reason"] = _plan(dev, s, v).reason  # PlanError: the variant does not take this call
                row["compute_only"] = bool(kernel(v).facts.get("compute_only"))
                state = {"i": 0}

                def call(distinct=False):
                    j = state["i"]
                    wg.ops.linear_q(tx, tws[j % copies], norm=tnorm, eps=1e-5, residual=tres,
                                    activation="swiglu" if s.swiglu else None,
                                    out=ys[j % len(ys)] if distinct else ys[0], variant=v)
                    state["i"] = j + 1

                call()
                if not row["compute_only"]:
                    row["max_rel_err_vs_float64"] = _check_rows(ys[0].numpy(), x, qw, s, norm, residual)
                # the shape's first variant warms the GPU's clocks up; the next ones find them up
                us, reps, source = time_calls(dev, call, target_s, 400, warm_s=0.3 if planned else 0.05)
                row.update(gpu_us=us, reps=reps, time_source=source, gbps=s.bytes / (us * 1e-6) / 1e9)
                if copy_gbps:
                    row["fraction_of_copy"] = row["gbps"] / copy_gbps
                if planned and copy_gbps and not row["compute_only"]:
                    # the read kernel reading this call's bytes in a chain: no one-pass kernel over them does better
                    row.update(ceiling_fields(dev, s.bytes, row["fraction_of_copy"], copy_gbps,
                                              target_us=target_s * 1e6))
                if planned:
                    us2, _, _ = time_calls(dev, lambda: call(True), target_s, 400)
                    row.update(distinct_outputs_gpu_us=us2, distinct_outputs_gbps=s.bytes / (us2 * 1e-6) / 1e9)
                    if use_torch:
                        torch_us = torch_us or _torch_gemv_us(s.rows, s.out_features, s.in_features,
                                                              max(1, min(8, -(-CACHE_BYTES // (2 * s.out_features
                                                                                                * s.in_features)))),
                                                              max(reps, 20))
                        # torch's own traffic: W, x and y all f16 (x and y were counted as f32: 4 bytes)
                        f16_bytes = 2 * (s.out_features * s.in_features + s.rows * (s.in_features + s.out_features))
                        row.update(torch_f16_us=torch_us, torch_f16_gbps=f16_bytes / (torch_us * 1e-6) / 1e9,
                                   speedup_vs_torch_f16=torch_us / us)
            except (WgraphError, MemoryError) as e:
                row.update(status="unsupported", note=f"{type(e).__name__}: {e}")
            except Exception as e:  # noqa: BLE001 - one failing shape must not end the run
                row.update(status="error", note=f"{type(e).__name__}: {e}")
            rows.append(row)
            progress(f"[{i + 1:3d}/{len(shapes)}] {s.ggml_type} M={s.rows} {s.matrix} [{s.out_features}, "
                     f"{s.in_features}] {v:28} " + (f"{row['gbps']:.4g} GB/s" + (f" ({row['fraction_of_copy']:.2f} of copy)"
                                                                 if "fraction_of_copy" in row else "")
                                   if row["status"] == "ok" else f"{row['status']}: {row['note'][:80]}"))
        del tws, ys
        gc.collect()
    return rows


def dispatch_floor(dev, target_s: float) -> dict:
    """GPU time per call of a quantized GEMV too small to matter (M=1, [8, 256] Q4_0) in a chain of 200 calls
    (each waits for the last, as in a decode step): what every call pays."""
    qw = random_blocks("Q4_0", 8, 256, np.random.default_rng(1)).upload(dev)
    x, y = dev.tensor(np.ones((1, 256), np.float32)), dev.empty((1, 8), "f32")
    call = lambda: wg.ops.linear_q(x, qw, out=y)  # noqa: E731
    call()
    timing.warm(dev, call, 0.3)
    us = timing.calls_us(dev, call, 200)
    if us:
        return {"shape": [8, 256], "ggml_type": "Q4_0", "gpu_us": statistics.median(us), "reps": 200,
                "time_source": "pass-span"}
    us, reps, source = time_calls(dev, call, target_s, 200)
    return {"shape": [8, 256], "ggml_type": "Q4_0", "gpu_us": us, "reps": reps, "time_source": source}


# ---- the decode rows ----

def _quantize_rows(a: np.ndarray, ggml_type: str) -> np.ndarray:
    """Raw blocks of float rows (a process pool's task: module level, so a spawned worker can import it)."""
    return quantize(np.asarray(a, np.float32), ggml_type).raw()


def quantize_weights(weights: dict, ggml_type: str, workers: int, chunk_rows: int = 4096) -> dict:
    """Every matrix of an HF-named dict quantized to `ggml_type` or a file type's formats (checkpoint_formats;
    wgraph.ggml_blocks.quantize), row chunks spread over `workers` spawned processes (numpy's quantizers are
    single-threaded; 1.24 B weights take a minute alone)."""
    from wgraph.models.quantized import checkpoint_formats

    formats = checkpoint_formats(weights, ggml_type)
    jobs = [(name, r) for name in formats for r in range(0, weights[name].shape[0], chunk_rows)]
    parts: dict = {}
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as ex:
            futures = {job: ex.submit(_quantize_rows, weights[job[0]][job[1]:job[1] + chunk_rows], formats[job[0]])
                       for job in jobs}
            parts = {job: f.result() for job, f in futures.items()}
    else:
        parts = {job: _quantize_rows(weights[job[0]][job[1]:job[1] + chunk_rows], formats[job[0]]) for job in jobs}
    out = {}
    for name, a in weights.items():
        if np.ndim(a) != 2:
            out[name] = a
            continue
        raw = np.concatenate([parts[(name, r)] for r in range(0, a.shape[0], chunk_rows)], axis=0)
        out[name] = QuantizedWeight.from_bytes(formats[name], tuple(a.shape), raw)
    return out


def _decode_row(dev, model, *, label: str, steps: int, prompt: list, copy_gbps: float | None) -> dict:
    """Greedy decode rate of a loaded model: `steps` tokens submitted back to back after a warm-up; the host's
    encoding time per token; the GPU time and dispatches of one step (of the programs the timed steps ran, by
    their steps: model.step_costs) and per op (a replay of the whole cache's program with every dispatch stamped:
    each stamp pair adds ~7 us on the H200, so the split, not the sum, is the news)."""
    from wgraph.bench.model import ran_programs, step_costs

    model.generate(prompt, steps + 1, in_flight=8)  # warm-up: pipelines, clocks
    model.prefill(prompt)
    dev.sync()
    t0 = time.perf_counter()
    host = model.run_steps(steps, in_flight=8)
    dev.sync()
    dt = (time.perf_counter() - t0) / steps
    ran = ran_programs(model, steps)   # the short program at a long cache's first positions, the whole cache's
    note = ""
    try:  # GPU time of one step, from replays in one stamped pass
        programs, dispatches, gpu_ms = step_costs(dev, model, prompt, ran)
    except Exception as e:  # noqa: BLE001 - the rate stands without the GPU split
        programs, dispatches, gpu_ms = step_costs(dev, model, prompt, ran, gpu=False)
        note = f"GPU time per step not measured: {type(e).__name__}: {e}"
    per_token = model.weight_bytes_per_token
    row = {"model": label, "status": "ok", "note": note, "weight_bytes_per_token": per_token, "programs": programs,
           "dispatches_per_token": dispatches, "ms_per_token": dt * 1e3, "tokens_per_s": 1.0 / dt,
           "x_int8_gemvs": model.x_int8_gemvs,
           "host_ms_per_token": host / steps * 1e3, "weight_gbps": per_token / dt / 1e9,
           "fraction_of_copy_bandwidth": per_token / dt / 1e9 / copy_gbps if copy_gbps else None}
    row["gpu_ms_per_step"] = gpu_ms
    try:
        prof = model.program.profile()
        row["by_op_stamped"] = {g.name: {"dispatches": g.dispatches, "gpu_us": g.gpu_us} for g in prof.by_op()}
    except Exception as e:  # noqa: BLE001 - the rate stands without the GPU split
        row["note"] = "; ".join(filter(None, (note, f"GPU time per op not measured: {type(e).__name__}: {e}")))
    return row


def bench_quant_models(dev, *, big: bool, copy_gbps: float | None, use_torch: bool, progress) -> list[dict]:
    """The 1B-shape (or, on a CPU adapter, a tiny) Llama decode: f16 wgraph, each quantized format, torch f16."""
    from wgraph.bench.model import LLAMA_1B, TINY, SeededLlama, seeded_host_weights, torch_weights
    from wgraph.models import LlamaConfig
    from wgraph.models.quantized import QuantizedLlama

    # the tiny model's vocabulary is as wide as the x_int8 GEMVs' least (quant.toml's min_n), so its lm_head plans one
    tiny = dict(TINY, hidden_size=256, intermediate_size=512, head_dim=64, vocab_size=8192)
    cfg = LlamaConfig.from_dict(LLAMA_1B if big else tiny)
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
    for t in (MODEL_TYPES if big else QUICK_MODEL_TYPES):
        q = None
        for x_int8 in (False, True) if t in (MODEL_X_INT8 if big else QUICK_MODEL_X_INT8) else (False,):
            label = f"wgraph {t}" + (" x_int8" if x_int8 else "")
            row: dict = {"model": label, "status": "ok", "note": ""}
            try:
                t0 = time.perf_counter()
                if q is None:
                    progress(f"quant models: quantizing to {t} ({workers} processes)")
                    q = quantize_weights(weights, t, workers)
                quantize_s = time.perf_counter() - t0
                model = QuantizedLlama.from_weights(cfg, q, dev, max_seq=max_seq, x_int8=x_int8)
                progress(f"quant models: decoding {steps} tokens with {label[7:]} weights")
                row = _decode_row(dev, model, label=label, steps=steps, prompt=prompt, copy_gbps=copy_gbps)
                row.update(quantize_s=quantize_s, speedup_vs_wgraph_f16=row["tokens_per_s"] / f16["tokens_per_s"])
                del model
            except (WgraphError, MemoryError) as e:
                row.update(status="unsupported", note=f"{type(e).__name__}: {e}")
            except Exception as e:  # noqa: BLE001 - one failing row must not end the run
                row.update(status="error", note=f"{type(e).__name__}: {e}")
            rows.append(row)
            gc.collect()
        del q
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


def step_gemv_sums(rows: list[dict], layers: int) -> list[dict]:
    """For each format whose one-row planned GEMVs cover every call of the 1B step (LLAMA_1B_CALLS): the step's
    GEMV time, `layers` x (norm + qkv, o_proj, gate + up, down) + the lm_head, as planned and with every call at
    the read kernel's time on its own bytes (`read_same_bytes_us`): a floor of the GEMVs' share of a decode step
    under this dispatch structure, measured call by call (the attention, RoPE and embedding dispatches come on
    top of it)."""
    out = []
    for t in dict.fromkeys(r["ggml_type"] for r in rows):
        calls = {r["matrix"]: r for r in rows if r["ggml_type"] == t and r["rows"] == 1 and r.get("planned")
                 and r["status"] == "ok" and "read_same_bytes_us" in r}
        if set(calls) != set(LLAMA_1B_CALLS):
            continue
        count = {name: 1 if name == "norm+lm_head" else layers for name in LLAMA_1B_CALLS}
        out.append({"ggml_type": t, "layers": layers,
                    "planned_us": sum(count[n] * calls[n]["gpu_us"] for n in count),
                    "read_ceiling_us": sum(count[n] * calls[n]["read_same_bytes_us"] for n in count),
                    "dispatches": sum(count.values())})
    return out


def gemv_table(copy: dict, floor: dict, rows: list[dict], sums: list[dict] = ()) -> str:
    lines = [f"copy kernel: {copy['gbps']:.4g} GB/s; dispatch floor: {floor['gpu_us']:.2f} us per call of a "
             f"[8, 256] Q4_0 GEMV in a chain"]
    head = (f"{'type':7} {'M':>2} {'call':20} {'out':>7} {'in':>5} {'variant':28} {'gpu us':>8} {'GB/s':>7} "
            f"{'of copy':>7} {'ceiling':>7} {'indep us':>8} {'torch f16 us':>12}")
    lines += [head, "-" * len(head)]
    for r in rows:
        shape = f"{r['ggml_type']:7} {r['rows']:2d} {r['matrix']:20} {r['out_features']:7d} {r['in_features']:5d}"
        if r["status"] != "ok":
            lines.append(f"{shape} {r.get('variant', ''):28} {r['status']}: {r['note'][:80]}")
            continue
        mark = "*" if r["planned"] else " "
        frac = f"{r['fraction_of_copy']:7.3f}" if r.get("fraction_of_copy") else f"{'-':>7}"
        ceil = f"{r['read_same_bytes_fraction']:7.3f}" if "read_same_bytes_fraction" in r else f"{'':7}"
        indep = f"{r['distinct_outputs_gpu_us']:8.2f}" if "distinct_outputs_gpu_us" in r else f"{'':8}"
        torch_us = f"{r['torch_f16_us']:12.2f}" if "torch_f16_us" in r else f"{'':12}"
        lines.append(f"{shape} {r['variant'] + mark:28} {r['gpu_us']:8.2f} {r['gbps']:7.4g} {frac} {ceil} {indep} {torch_us}")
    lines.append("GB/s: (blocks + x + y (+ norm weight, residual) bytes) / GPU time per call, calls writing one output "
                 "(each waits for the last); * planned; ceiling: the fraction of the copy bandwidth a kernel that only "
                 "reads reaches on the planned row's bytes in a chain of calls (its dispatch floor and ramp "
                 "included: no one-pass kernel over that many bytes does better); indep us: the planned kernel with "
                 "distinct outputs (calls may overlap); torch: F.linear alone with f16 weights")
    for r in sums:
        lines.append(f"{r['ggml_type']}: the step's {r['dispatches']} GEMVs ({r['layers']} x (norm+qkv, o_proj, "
                     f"gate_up, down) + lm_head) {r['planned_us']:.1f} us as planned, {r['read_ceiling_us']:.1f} us "
                     f"at their same-bytes read ceilings")
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
                      f"{r['fraction_of_copy_bandwidth']:.1%} of copy  [{r['dispatches_per_token']} dispatches"
                      + (f", {r['x_int8_gemvs']} with x in int8]" if r.get("x_int8_gemvs") else "]"))
        if "speedup_vs_wgraph_f16" in r:
            extra += f"  {r['speedup_vs_wgraph_f16']:.2f}x wgraph f16"
        lines.append(f"  {r['model']:22} {r['tokens_per_s']:9.1f} tokens/s {r['ms_per_token']:8.3f} ms/token{extra}")
        if "host_ms_per_token" in r:
            gpu = r.get("gpu_ms_per_step")
            lines.append(f"  {'':22} host encoding {r['host_ms_per_token']:.3f} ms/token, GPU "
                         + (f"{gpu:.3f} ms per step (stamped replays)" if gpu else "time not measured"))
        if r.get("by_op_stamped"):
            lines.append(f"  {'':22} stamped by op: " + ", ".join(
                f"{op} {v['gpu_us']:.0f} us/{v['dispatches']}" for op, v in r["by_op_stamped"].items()))
    return "\n".join(lines)
