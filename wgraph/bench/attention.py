"""Attention throughput: prefill TFLOP/s and decode GB/s for the variant the planner picks on each shape
(optionally every variant that accepts it), GPU time from timestamp queries where the device has them,
and torch SDPA on CUDA beside it when torch is importable."""

from __future__ import annotations

import gc
import statistics
import time

import attrs
import numpy as np

import wgraph as wg
from wgraph.bench import timing, torch_ref, warmup
from wgraph.bench.grids import Shape, bytes_moved, flops
from wgraph.errors import WgraphError


def available() -> tuple[bool, str]:
    missing = [n for n in ("attention", "attention_plan") if not hasattr(wg.ops, n)]
    if missing:
        return False, f"wgraph.ops lacks {missing} in this build (issue 3); attention section skipped"
    return True, ""


def _jsonable(x):
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    if isinstance(x, (tuple, list)):
        return [_jsonable(i) for i in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, np.generic):
        return x.item()
    return str(x)


def plan_dict(plan) -> dict:
    """Every field of a KernelPlan (or whatever attention_plan returns) as JSON data."""
    if attrs.has(type(plan)):
        return _jsonable(attrs.asdict(plan, recurse=False))
    return {k: _jsonable(getattr(plan, k)) for k in ("variant", "tier", "reason", "workgroups") if hasattr(plan, k)}


def _inputs(dev, s: Shape, rng):
    qd = "f16" if s.dtype == "f16" else "f32"
    kd = "f32" if s.dtype == "f32" else "f16"
    q = rng.uniform(-1, 1, (s.S, s.Hq, s.D)).astype(np.float32)
    k = rng.uniform(-1, 1, (s.L, s.Hkv, s.D)).astype(np.float32)
    v = rng.uniform(-1, 1, (s.L, s.Hkv, s.D)).astype(np.float32)
    np_of = {"f32": np.float32, "f16": np.float16}
    arrays = (q.astype(np_of[qd]), k.astype(np_of[kd]), v.astype(np_of[kd]))  # torch gets what the GPU got
    return arrays, tuple(dev.tensor(a, d) for a, d in zip(arrays, (qd, kd, kd)))


def candidate_variants(s: Shape) -> list[str]:
    """Every registry attention variant for this phase and dtype (forced with variant=; the op validates)."""
    from wgraph.kernels.registry import kernels_for

    return [k.name for k in kernels_for("attention")
            if k.facts.get("phase") == s.phase and k.facts.get("dtype") == s.dtype]


def _plans(s: Shape, tensors, variant) -> bool:
    try:
        wg.ops.attention_plan(*tensors, causal=s.causal, variant=variant)
        return True
    except WgraphError:
        return False


WARM_S = 0.2  # seconds of untimed back-to-back batches before a shape is timed


def _gpu_times_us(dev, call, reps: int, batches: int = 3) -> list[float] | None:
    """GPU time per call (µs), one value per batch: `reps` back-to-back calls in one recording, timed from
    the first dispatch's start to the last one's end (timestamp queries), divided by reps. This is how
    torch's CUDA events time its calls; a call submitted alone would leave the GPU idle (and its clocks
    low) in between. First WARM_S seconds of steady copies (warmup.steady_work: a GPU left idle needs that long of
    steady work to ramp its clocks up, and batches of short calls, whose recording keeps the host busier than the
    GPU, did not raise them on an H100), then one untimed batch."""
    if not dev.caps.has_timestamps:
        return None
    if not dev.caps.is_cpu:   # a CPU adapter's "GPU" is the host's cores: no clocks to raise
        warmup.steady_work(dev, WARM_S)
    with dev.record():
        for _ in range(reps):
            call()
    dev.sync()
    times = []
    for _ in range(batches):
        with dev.record(profile=True) as rec:
            for _ in range(reps):
                call()
        times.append(rec.profile().span_us / reps)
    return times


def measure(dev, s: Shape, tensors, variant: str | None, target_s: float, max_reps: int, arrays=None) -> dict:
    q, k, v = tensors
    kw = {"causal": s.causal, "variant": variant}
    plan = wg.ops.attention_plan(q, k, v, **kw)
    out = wg.ops.attention(q, k, v, **kw)  # warm: pipelines, bind groups, uniforms

    def call():
        wg.ops.attention(q, k, v, out=out, **kw)

    estimate, reps = timing.reps_for(dev, call, target_s, max_reps)
    gpu = _gpu_times_us(dev, call, reps)
    # a call slower than the whole target (a fallback kernel at a long S): its one timed call is the wall
    # time, so a slow shape costs 3 calls instead of 4 and the budget stays near its mark
    wall = estimate * 1e6 if gpu and estimate > 2 * target_s else timing.wall_us(dev, call, reps)
    row = {"plan": plan_dict(plan), "variant": plan.variant, "tier": getattr(plan, "tier", None),
           "reason": getattr(plan, "reason", None), "reps": reps, "wall_us": wall,
           "gpu_us": statistics.median(gpu) if gpu else None, "gpu_us_all": gpu,
           "time_source": "timestamp-span" if gpu else "wall+sync"}
    if s.phase == "decode" and arrays is not None:
        # decode calls are short: the timestamps around each dispatch are a visible part of the span; the replay
        # is timed by the wall clock, so a device without timestamp queries reports it too
        dts = ("f16" if s.dtype == "f16" else "f32", "f32" if s.dtype == "f32" else "f16")

        def build(g, i):
            if i == 0:
                build.st = timing.states(g, arrays, (dts[0], dts[1], dts[1]))
            return wg.ops.attention(*build.st, **kw)

        replay = timing.replay(dev, build)
        row["replay_us"], row["replay_host_us"] = replay.us_per_call, replay.host_us_per_call
    row["_out"] = out
    return row


def _throughput(row: dict, s: Shape, us: float | None, prefix: str = ""):
    if not us:
        return
    if s.phase == "prefill":
        row[prefix + "tflops"] = row["flops"] / (us * 1e-6) / 1e12
    else:
        row[prefix + "gbps"] = row["bytes"] / (us * 1e-6) / 1e9


def bench_attention(dev, shapes, *, variants: str = "planned", budget_s: float = 420.0, target_s: float = 0.3,
                    max_reps: int = 20, use_torch: bool = True, progress=None) -> tuple[list[dict], dict]:
    """Rows for every (shape, variant); and the torch facts. Shapes left when the budget is spent are
    listed as skipped, never silently dropped."""
    ok, note = available()
    torch_info = torch_ref.probe() if use_torch else {"available": False, "note": "disabled (--no-torch)"}
    if not ok:
        return [], {**torch_info, "section_note": note}
    torch_info["warmup"] = warmup.prepare(dev, bool(torch_info.get("available")))
    rng = np.random.default_rng(0)
    rows = []
    start = time.perf_counter()
    for i, s in enumerate(shapes):
        base = {**attrs.asdict(s), "flops": flops(s), "bytes": bytes_moved(s),
                "flops_convention": "4*S*L*Hq*D, causal S==L halved, causal S!=L exact pairs"}
        if time.perf_counter() - start > budget_s:
            rows.append({**base, "status": "skipped", "note": f"time budget of {budget_s:.0f} s spent"})
            continue
        names = [None] if variants == "planned" else [None] + candidate_variants(s)
        try:
            arrays, tensors = _inputs(dev, s, rng)
        except WgraphError as e:
            rows.append({**base, "status": "unsupported", "note": f"{type(e).__name__}: {e}"})
            continue
        torch_res = None
        planned_variant = None
        for forced in names:
            row = {**base, "forced": forced is not None, "status": "ok", "note": ""}
            try:
                if forced is not None and forced == planned_variant:
                    continue
                row.update(measure(dev, s, tensors, forced, target_s, max_reps, arrays))
                if forced is None:
                    planned_variant = row["variant"]
            except WgraphError as e:
                # rejected by attention_plan: the shape or forced variant does not fit (an answer, not a
                # failure); anything raised after a plan was made is a failure of the op
                planned = _plans(s, tensors, forced)
                row.update(status="error" if planned else "unsupported", variant=forced,
                           note=f"{type(e).__name__}: {e}")
                rows.append(row)
                continue
            except Exception as e:  # noqa: BLE001 - one failing shape must not end the run
                row.update(status="error", variant=forced, note=f"{type(e).__name__}: {e}")
                rows.append(row)
                continue
            out = row.pop("_out")
            us = row["gpu_us"] or row["wall_us"]
            _throughput(row, s, us)
            if torch_info.get("available"):
                try:
                    if torch_res is None:
                        reps = max(3, row["reps"])
                        torch_res = torch_ref.run_sdpa(s, *arrays, reps=reps)
                    ref = torch_res["output"]
                    got = out.numpy().astype(np.float32)
                    row["max_abs_diff_vs_torch"] = float(np.max(np.abs(got - ref))) if got.size else 0.0
                    row["torch_us"] = torch_res["torch_ms"] * 1e3
                    row["torch_note"] = torch_res["torch_note"]
                    _throughput(row, s, row["torch_us"], "torch_")
                    row["ratio_to_torch"] = row["torch_us"] / us  # > 1: wgraph faster
                    if row.get("replay_us"):
                        row["ratio_to_torch_replay"] = row["torch_us"] / row["replay_us"]
                    if "torch_graph_ms" in torch_res:
                        row["torch_graph_us"] = torch_res["torch_graph_ms"] * 1e3
                        if row.get("replay_us"):
                            row["ratio_to_torch_graph_replay"] = row["torch_graph_us"] / row["replay_us"]
                except Exception as e:  # noqa: BLE001
                    row["torch_note"] = f"torch failed: {type(e).__name__}: {e}"
            del out
            rows.append(row)
            if progress:
                progress(_progress_line(i + 1, len(shapes), time.perf_counter() - start, s, row))
        del tensors, arrays, torch_res
        gc.collect()
    first = next(((s, r) for s in shapes for r in rows if r.get("status") == "ok" and not r.get("forced")
                  and r.get("gpu_us") and (r["phase"], r["S"], r["L"], r["Hq"], r["Hkv"], r["D"], r["dtype"])
                  == (s.phase, s.S, s.L, s.Hq, s.Hkv, s.D, s.dtype)), None)
    if first is not None and time.perf_counter() - start <= budget_s:
        # the first shape timed again at the end: equal times say the first shape is not slow for being first
        s, r = first
        _, tensors = _inputs(dev, s, np.random.default_rng(0))
        again = measure(dev, s, tensors, None, target_s, max_reps)
        torch_info["first_shape_again"] = {"shape": s.label(), "gpu_us_first": r["gpu_us"],
                                           "gpu_us_again": again["gpu_us"]}
    return rows, torch_info


def _progress_line(i, n, elapsed, s: Shape, row: dict) -> str:
    tput = (f"{row['tflops']:.4g} TFLOP/s" if "tflops" in row else f"{row['gbps']:.4g} GB/s" if "gbps" in row else "-")
    torch = ""
    if "ratio_to_torch" in row:
        t = f"{row['torch_tflops']:.4g} TFLOP/s" if "torch_tflops" in row else f"{row['torch_gbps']:.4g} GB/s"
        torch = f"  torch {t} (ratio {row['ratio_to_torch']:.3f})"
    return f"[{i:3d}/{n} {elapsed:6.1f}s] {s.label():42} {row['variant']:28} {tput}{torch}"
