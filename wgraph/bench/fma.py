"""The ALU ceiling of this stack (wgpu-native -> Vulkan -> the driver; portable WGSL reaches no tensor cores, and
whether wgpu-native's experimental cooperative matrices do is benchmarks/coop_probe.py's question):
every thread of many workgroups runs independent FMA chains in registers (fma_peak.wgsl) in f32, f16, and
packed vec2<f16> / vec4<f16>. TFLOP/s counts 2 flops per FMA and `lanes` FMAs per fma() call. The GEMM rows
(wgraph/bench/gemm.py) and the prefill attention rows are read as a fraction of it."""

from __future__ import annotations

import attrs
import numpy as np

from wgraph.bench.timing import time_calls
from wgraph.errors import WgraphError
from wgraph.kernels.registry import kernel
from wgraph.ops.core import OpDef, apply, register
from wgraph.tensor import TensorSpec

TYPES = ("f32", "f16", "vec2f16", "vec4f16")
SEED = np.array([0.5, 0.9, 0.1, 1e-3], np.float32)  # start, mul, add, start step: chains converge to 1
MAX_ITERATIONS = 65535  # a CPU adapter (lavapipe) stops an invocation's loop there


@attrs.frozen
class FmaParams:
    variant: str
    iterations: int
    workgroups: int


def _infer(params: FmaParams, specs):
    return (TensorSpec((params.workgroups * kernel(params.variant).threads,), "f32"),)


def _encode(ctx, params: FmaParams, inputs, outputs):
    (seed,), (out,) = inputs, outputs
    return [ctx.dispatch(params.variant, uniforms={"iterations": params.iterations},
                         bindings={"seed": seed, "out": out}, workgroups=ctx.grid(params.workgroups),
                         label="bench_fma")]


BENCH_FMA = register(OpDef("bench_fma", _infer, _encode))


def fmas_per_call(variant: str, iterations: int, workgroups: int) -> int:
    """FMAs one dispatch does (vector lanes counted)."""
    kv = kernel(variant)
    return (workgroups * kv.threads * iterations * kv.const("UNROLL") * kv.const("CHAINS")
            * kv.facts["lanes"])


def expected_out(variant: str, iterations: int, threads: int) -> np.ndarray:
    """What the kernel writes for each thread, in float64 with the type's rounded mul and add (the chains'
    own rounding is not modelled: compare with a tolerance)."""
    kv = kernel(variant)
    elem = np.float16 if "f16" in variant else np.float32
    start, mul, add, step = SEED.astype(np.float64)
    mul, add = float(elem(mul)), float(elem(add))
    steps = iterations * kv.const("UNROLL")
    starts = (start + (np.arange(threads) % 64)[:, None] * step + np.arange(kv.const("CHAINS"))[None, :] * step)
    starts = starts.astype(elem).astype(np.float64)
    fixed = add / (1.0 - mul)
    chains = fixed + (starts - fixed) * mul ** steps
    return chains.sum(axis=1) * kv.facts["lanes"]


def run_fma(dev, variant: str, iterations: int, workgroups: int, seed=None, out=None):
    """One dispatch of the FMA kernel; returns its output tensor (one f32 per thread)."""
    seed = seed if seed is not None else dev.tensor(SEED)
    return apply(BENCH_FMA, FmaParams(variant, int(iterations), int(workgroups)), (seed,), out=out)


def fma_peak(dev, *, target_s: float = 0.1, progress=None) -> list[dict]:
    """One row per arithmetic type: TFLOP/s of the FMA chains (2 flops per FMA), with the call it measured."""
    cpu = dev.caps.is_cpu
    workgroups = 16 if cpu else 16384  # the GPU: many waves of workgroups, so the last one's tail is noise
    call_us = 5_000.0  # one call long enough that a dispatch's fixed cost is noise
    seed = dev.tensor(SEED)
    rows = []
    for name in TYPES:
        variant = f"bench_fma_{name}"
        kv = kernel(variant)
        row = {"type": name, "variant": variant, "lanes": kv.facts["lanes"], "workgroups": workgroups,
               "threads": workgroups * kv.threads, "status": "ok", "note": ""}
        try:
            missing = sorted(set(kv.features) - dev.caps.features)
            if missing:
                raise WgraphError(f"needs {missing}")
            out = dev.empty((workgroups * kv.threads,), "f32")
            iterations = 2 if cpu else 64
            us, _, _ = time_calls(dev, lambda: run_fma(dev, variant, iterations, workgroups, seed, out), 0.02, 5)
            iterations = int(min(MAX_ITERATIONS, max(iterations, iterations * call_us / max(us, 1e-3))))
            call = lambda: run_fma(dev, variant, iterations, workgroups, seed, out)  # noqa: E731
            call()
            got = out.numpy()
            want = expected_out(variant, iterations, got.size)
            us, reps, source = time_calls(dev, call, target_s, 50)
            fmas = fmas_per_call(variant, iterations, workgroups)
            row.update(iterations=iterations, fmas_per_call=fmas, gpu_us=us, reps=reps, time_source=source,
                       tflops=2 * fmas / (us * 1e-6) / 1e12,
                       max_rel_err_vs_float64=float(np.max(np.abs(got - want) / np.abs(want))))
        except (WgraphError, MemoryError) as e:
            row.update(status="unsupported", note=f"{type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - one failing type must not end the run
            row.update(status="error", note=f"{type(e).__name__}: {e}")
        rows.append(row)
        if progress:
            progress(f"fma {name:8} " + (f"{row['tflops']:.4g} TFLOP/s" if row["status"] == "ok"
                                         else f"{row['status']}: {row['note'][:80]}"))
    return rows


def peak_tflops(result: dict, kind: str = "f32") -> float | None:
    """The FMA peak of type `kind` measured in this run (result["fma"]), or None."""
    for row in result.get("fma", {}).get("rows", []):
        if row["type"] == kind and row["status"] == "ok":
            return row["tflops"]
    return None


def section(dev, result: dict, *, quick: bool, progress=None) -> dict:
    """result["fma"], measured now unless an earlier section of this run did."""
    if "fma" not in result:
        result["fma"] = {"rows": fma_peak(dev, target_s=0.05 if quick else 0.2, progress=progress),
                         "flops": "2 per FMA; vecN<f16> fma() = N FMAs",
                         "kernel": "fma_peak.wgsl: 8 independent chains a = fma(a, mul, add) per thread, 32 steps "
                                   "per loop iteration, mul/add/start from a buffer, every chain written out"}
    return result["fma"]


def table(fma: dict) -> str:
    head = f"{'type':8} {'lanes':>5} {'TFLOP/s':>9} {'gpu us':>9} {'iterations':>10} {'rel err':>8}"
    lines = [head, "-" * len(head)]
    for r in fma["rows"]:
        if r["status"] != "ok":
            lines.append(f"{r['type']:8} {r['status']}: {r['note'][:90]}")
            continue
        lines.append(f"{r['type']:8} {r['lanes']:5d} {r['tflops']:9.4g} {r['gpu_us']:9.1f} {r['iterations']:10d} "
                     f"{r['max_rel_err_vs_float64']:8.2g}")
    lines.append("TFLOP/s: 2 flops per FMA over the GPU time of one dispatch of independent FMA chains in registers "
                 "(the ALU ceiling); rel err: the chains' results against float64.")
    return "\n".join(lines)
