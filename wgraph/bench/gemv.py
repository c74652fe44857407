"""Memory bandwidth and the decode GEMV: a plain copy kernel's bandwidth (bytes read + written over GPU
time), then `linear` with 1..8 rows on large weight matrices as GB/s and as a fraction of that copy
bandwidth measured in the same run, beside `torch.nn.functional.linear` on the same weights when torch with
CUDA is importable. Calls cycle over enough copies of W that they do not fit the GPU's last-level cache."""

from __future__ import annotations

import gc
import statistics
import time

import attrs
import numpy as np

import wgraph as wg
from wgraph.bench.attention import _gpu_times_us, _wall_us
from wgraph.errors import WgraphError
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.tensor import TensorSpec

CACHE_BYTES = 256 << 20  # calls cycle over copies of W totalling at least this (H200 L2: 50 MB)


@attrs.frozen
class GemvShape:
    rows: int
    out_features: int
    in_features: int
    weight_dtype: str

    def label(self) -> str:
        return f"linear M={self.rows} W=[{self.out_features}, {self.in_features}] {self.weight_dtype}"

    @property
    def weight_bytes(self) -> int:
        return self.out_features * self.in_features * (2 if self.weight_dtype == "f16" else 4)

    @property
    def bytes(self) -> int:
        """W once, x and y (f32)."""
        return self.weight_bytes + 4 * self.rows * (self.in_features + self.out_features)


GEMV_GRIDS = {
    "tiny": (GemvShape(1, 64, 256, "f32"), GemvShape(2, 64, 256, "f16")),
    "quick": (GemvShape(1, 1024, 2048, "f32"), GemvShape(1, 2048, 1024, "f16")),
    "small": tuple(GemvShape(1, n, k, dt) for dt in ("f16", "f32") for n, k in ((2048, 8192), (8192, 2048))),
    "full": tuple(GemvShape(m, n, k, dt) for dt in ("f16", "f32")
                  for m, n, k in ((1, 2048, 8192), (1, 8192, 2048), (1, 128256, 2048), (8, 8192, 2048))),
}
COPY_BYTES = {"tiny": 1 << 20, "quick": 16 << 20, "small": 256 << 20, "full": 512 << 20}


# ---- the copy kernel (an op private to the bench) ----

@attrs.frozen
class CopyParams:
    pass


def _infer_copy(params, specs):
    (x,) = specs
    if x.nbytes % 16:
        raise wg.ShapeError(f"bench_copy copies 16-byte words; {x.nbytes} bytes is not a multiple of 16")
    return (TensorSpec(x.shape, x.dtype),)


def _encode_copy(ctx, params, inputs, outputs):
    (x,), (y,) = inputs, outputs
    count = x.nbytes // 16
    groups = min(ceil_div(count, 256), ctx.caps.max_workgroups_per_dim)
    return [ctx.dispatch("bench_copy", uniforms={"count": count}, bindings={"x": x, "y": y},
                         workgroups=(max(1, groups), 1, 1), label="bench_copy")]


BENCH_COPY = register(OpDef("bench_copy", _infer_copy, _encode_copy))


def _warm(dev, call, seconds: float):
    """Keep the GPU busy with `call` for `seconds`: an idle GPU's clocks take a while to rise (the H200 idles
    at 345 MHz, and the host's preparation of the next shape's weights leaves it idle)."""
    if dev.caps.is_cpu:
        return
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        with dev.record():
            for _ in range(20):
                call()
        dev.sync()


def _time(dev, call, target_s: float, max_reps: int, warm_s: float = 0.3):
    _warm(dev, call, warm_s)
    dev.sync()
    t0 = time.perf_counter()
    call()
    dev.sync()
    estimate = time.perf_counter() - t0
    reps = int(max(1, min(max_reps, target_s / max(estimate, 1e-6))))
    gpu = _gpu_times_us(dev, call, reps)
    us = statistics.median(gpu) if gpu else _wall_us(dev, call, reps)
    return us, reps, ("timestamp-span" if gpu else "wall+sync")


def copy_bandwidth(dev, nbytes: int, target_s: float = 0.2) -> dict:
    """GB/s of the plain copy kernel over `nbytes` (bounded by the device's binding size): (read + write) / time."""
    nbytes = min(nbytes, dev.caps.max_storage_binding_size) // 16 * 16
    x = dev.tensor(np.random.default_rng(0).integers(0, 2**32, nbytes // 4, dtype=np.uint32))
    y = dev.empty(x.shape, "u32")
    call = lambda: apply(BENCH_COPY, CopyParams(), (x,), out=y)  # noqa: E731
    call()
    ok = bool(np.array_equal(y.numpy(), x.numpy()))
    us, reps, source = _time(dev, call, target_s, 50, warm_s=1.0)
    return {"bytes_copied": nbytes, "bytes_moved": 2 * nbytes, "gpu_us": us, "reps": reps, "time_source": source,
            "gbps": 2 * nbytes / (us * 1e-6) / 1e9, "copy_correct": ok}


def _torch_linear(x, ws, reps: int) -> dict:
    import torch
    import torch.nn.functional as F

    dt = torch.float16 if ws[0].dtype == np.float16 else torch.float32
    tw = [torch.from_numpy(w).to("cuda") for w in ws]
    tx = torch.from_numpy(x).to("cuda").to(dt)
    out = F.linear(tx, tw[0])
    for w in tw:
        F.linear(tx, w)
    torch.cuda.synchronize()
    times = []
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(reps):
            F.linear(tx, tw[i % len(tw)])
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / reps)
    result = {"torch_us": statistics.median(times) * 1e3, "output": out.float().cpu().numpy()}
    del tw, tx, out
    return result


def dispatch_floor(dev, target_s: float = 0.05) -> dict:
    """GPU time per call of a linear too small to matter (M=1, [8, 256] f16): what every call pays."""
    s = GemvShape(1, 8, 256, "f16")
    row = bench_gemv(dev, [s], copy_gbps=None, use_torch=False, torch_available=False, target_s=target_s)[0]
    return {"shape": attrs.asdict(s), "gpu_us": row.get("gpu_us"), "variant": row.get("variant"),
            "status": row["status"]}


def bench_gemv(dev, shapes, *, copy_gbps: float | None, use_torch: bool, torch_available: bool,
               target_s: float = 0.2, max_reps: int = 200, progress=None) -> list[dict]:
    """One row per shape: plan, GPU µs per call, GB/s, fraction of the copy bandwidth, torch beside it."""
    from wgraph.ops.dense import plan_linear

    rng = np.random.default_rng(0)
    rows = []
    for i, s in enumerate(shapes):
        row = {**attrs.asdict(s), "bytes": s.bytes, "weight_bytes": s.weight_bytes, "status": "ok", "note": ""}
        try:
            plan = plan_linear(s.rows, s.out_features, s.in_features, s.weight_dtype, dev.caps)
            row.update(variant=plan.variant, reason=plan.reason)
            copies = max(1, min(8, -(-CACHE_BYTES // s.weight_bytes)))
            np_dt = np.float16 if s.weight_dtype == "f16" else np.float32
            ws = [(rng.standard_normal((s.out_features, s.in_features), dtype=np.float32) * 0.05).astype(np_dt)
                  for _ in range(copies)]
            x = rng.standard_normal((s.rows, s.in_features), dtype=np.float32)
            tws = [dev.tensor(w) for w in ws]
            tx = dev.tensor(x)
            y = dev.empty((s.rows, s.out_features), "f32")
            state = {"i": 0}

            def call():
                wg.ops.linear(tx, tws[state["i"] % copies], out=y)
                state["i"] += 1

            state["i"] = 0
            call()
            got = y.numpy()
            exact = x.astype(np.float64) @ ws[0].astype(np.float64).T
            row["max_rel_err_vs_float64"] = float(np.max(np.abs(got - exact)) / max(np.max(np.abs(exact)), 1e-30))
            us, reps, source = _time(dev, call, target_s, max_reps)
            row.update(weight_copies=copies, gpu_us=us, reps=reps, time_source=source,
                       gbps=s.bytes / (us * 1e-6) / 1e9)
            if copy_gbps:
                row["fraction_of_copy"] = row["gbps"] / copy_gbps
            if use_torch and torch_available:
                t = _torch_linear(x, ws, max(reps, 20))
                row.update(torch_us=t["torch_us"], torch_gbps=s.bytes / (t["torch_us"] * 1e-6) / 1e9,
                           ratio_to_torch=t["torch_us"] / us)
                ref = t["output"]
                row["max_abs_diff_vs_torch"] = float(np.max(np.abs(ref - got)))
            del tws, ws
        except (WgraphError, MemoryError) as e:
            row.update(status="unsupported", note=f"{type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - one failing shape must not end the run
            row.update(status="error", note=f"{type(e).__name__}: {e}")
        rows.append(row)
        gc.collect()
        if progress:
            progress(f"[{i + 1:3d}/{len(shapes)}] {s.label():40} " + (
                f"{row['gbps']:.4g} GB/s" + (f" ({row['fraction_of_copy']:.2f} of copy)" if "fraction_of_copy" in row else "")
                + (f"  torch {row['torch_gbps']:.4g} GB/s (ratio {row['ratio_to_torch']:.3f})" if "torch_gbps" in row else "")
                if row["status"] == "ok" else f"{row['status']}: {row['note'][:80]}"))
    return rows
