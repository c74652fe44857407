"""Host cost per dispatch: the same N tiny `scale` dispatches through a raw wgpu-py loop (the floor), wgraph
immediate, wgraph recorded and a compiled graph's replay; then attention calls (a decode: split-K + combine, or
one pass on a GPU with subgroups; a prefill: one dispatch) immediate and recorded, whose per-dispatch cost is
read against the same floor.

Two clocks per run: `host` stops when `queue.submit` has returned (the CPU time a caller pays); `wall`
stops after waiting for the GPU too (map of a small buffer). Each is the median over `runs` runs."""

from __future__ import annotations

import gc
import statistics
import struct
import time
from typing import Callable

import numpy as np

import wgraph as wg
from wgraph.kernels.registry import kernel, select_variant

ELEMENTS = 256  # one workgroup: the GPU work is negligible, what is left is host cost


def _bind_group(dev, k, bgl, uniform, src, dst):
    entries = [
        {"binding": 0, "resource": {"buffer": uniform, "offset": 0, "size": k.uniform.size}},
        {"binding": 1, "resource": {"buffer": src.buffer, "offset": 0, "size": src.nbytes}},
        {"binding": 2, "resource": {"buffer": dst.buffer, "offset": 0, "size": dst.nbytes}},
    ]
    return dev.wgpu.create_bind_group(layout=bgl, entries=entries)


def _raw_scale(dev, a, b):
    """What the raw loops prebuild: scale's pipeline, a uniform buffer, and bind groups a -> b and b -> a."""
    k = kernel(select_variant("scale", output_dtype="f32"))
    pipeline, bgl = dev.pipelines.get(k)
    uniform = dev.wgpu.create_buffer(size=max(k.uniform.size, 16), usage=wg.device.UNIFORM_USAGE)
    dev.wgpu.queue.write_buffer(uniform, 0, struct.pack("<If", ELEMENTS, 0.5))
    return pipeline, uniform, (_bind_group(dev, k, bgl, uniform, a, b), _bind_group(dev, k, bgl, uniform, b, a))


def raw_floor(dev, a, b, n_ops: int) -> Callable[[], None]:
    """The minimum wgpu-py can do: prebuilt pipeline and bind groups, one pass, one submit."""
    pipeline, uniform, groups = _raw_scale(dev, a, b)
    queue = dev.wgpu.queue
    create_encoder = dev.wgpu.create_command_encoder

    def run():
        encoder = create_encoder()
        cpass = encoder.begin_compute_pass()
        for i in range(n_ops):
            cpass.set_pipeline(pipeline)
            cpass.set_bind_group(0, groups[i & 1], [0])
            cpass.dispatch_workgroups(1, 1, 1)
        cpass.end()
        queue.submit([encoder.finish()])

    run.keep = (uniform, groups)  # the buffers must outlive every run
    return run


def raw_submit_per_op(dev, a, b, n_ops: int) -> Callable[[], None]:
    """Raw wgpu-py with one encoder, one pass and one submit per dispatch: what an immediate op would cost at
    best if it submitted alone (wgraph's immediate ops share a submit: scheduler.queue.PENDING_ITEMS)."""
    pipeline, uniform, groups = _raw_scale(dev, a, b)
    queue = dev.wgpu.queue
    create_encoder = dev.wgpu.create_command_encoder

    def run():
        for i in range(n_ops):
            encoder = create_encoder()
            cpass = encoder.begin_compute_pass()
            cpass.set_pipeline(pipeline)
            cpass.set_bind_group(0, groups[i & 1], [0])
            cpass.dispatch_workgroups(1, 1, 1)
            cpass.end()
            queue.submit([encoder.finish()])

    run.keep = (uniform, groups)
    return run


def _ping_pong(a, b, n_ops: int):
    """n_ops scales alternating between two tensors: the same work in every wgraph mode."""
    scale = wg.ops.scale
    for i in range(n_ops):
        if i & 1:
            scale(b, 0.5, out=a)
        else:
            scale(a, 0.5, out=b)


def immediate(dev, a, b, n_ops: int):
    def run():
        _ping_pong(a, b, n_ops)
        dev.flush()  # the calls' whole host cost: the last pending ops submitted too

    return run


def recorded(dev, a, b, n_ops: int):
    def run():
        with dev.record():
            _ping_pong(a, b, n_ops)

    return run


def recorded_fresh(dev, a, b, n_ops: int):
    """Recorded, the way a user writes it: every op allocates its output from the pool."""
    scale = wg.ops.scale

    def run():
        y = a
        with dev.record():
            for _ in range(n_ops):
                y = scale(y, 0.5)

    return run


def graph_replay(dev, a, b, n_ops: int):
    """A compiled Graph of n_ops scales, replayed; None (with the reason) when this wgraph has no Graph."""
    if not hasattr(wg, "Graph"):
        return None, "wgraph.Graph is not available in this build (issue 5); row skipped"
    g = wg.Graph("bench_host")
    x = g.input("x", a.shape, "f32")
    y = x
    for _ in range(n_ops):
        y = wg.ops.scale(y, 0.5)
    g.output("y", y)
    prog = g.compile(dev)
    data = np.ones(a.shape, np.float32)
    try:  # prefer binding a device tensor (no upload); fall back to numpy inputs
        prog.run(x=a)
        arg = a
    except Exception:  # noqa: BLE001 - the Graph API is young; numpy input is the documented form
        prog.run(x=data)
        arg = data

    def run():
        prog.run(x=arg)

    run.keep = prog
    return run, f"prog.run(x={'Tensor' if arg is a else 'numpy'}) on a {n_ops}-node program"


# Attention calls small enough that the GPU work is a few microseconds: (q shape, k/v shape).
ATTENTION_SHAPES = {"decode": ((1, 8, 64), (256, 2, 64)), "prefill": ((16, 8, 64), (16, 2, 64))}


def _attention_calls(dev, phase: str, n_ops: int, recorded: bool):
    """As many attention calls as make n_ops dispatches, so one submit (recorded) holds as many dispatches as
    the floor's: a submit's fixed cost (encoder, finish, queue.submit: ~0.25 ms on lavapipe) spread over 10x
    fewer would add ~2 µs to each (the raw floor itself is 5.7 µs/dispatch at 100 dispatches per submit, 3.5
    at 1000). Immediate calls share a submit per scheduler.queue.PENDING_ITEMS items. `run.calls` is the count."""
    (qs, kvs) = ATTENTION_SHAPES[phase]
    rng = np.random.default_rng(0)
    q = dev.tensor(rng.standard_normal(qs).astype(np.float32))
    k = dev.tensor(rng.standard_normal(kvs).astype(np.float32))
    v = dev.tensor(rng.standard_normal(kvs).astype(np.float32))
    out = dev.empty(qs, "f32")
    attention = wg.ops.attention
    dev.flush()
    before = dev.stats.dispatches
    attention(q, k, v, causal=True, out=out)  # one call, to count its dispatches (a split-K decode: 2, one pass: 1)
    dev.flush()
    n_calls = max(1, n_ops // max(1, dev.stats.dispatches - before))

    def calls():
        for _ in range(n_calls):
            attention(q, k, v, causal=True, out=out)

    if recorded:
        def run():
            with dev.record():
                calls()
    else:
        def run():
            calls()
            dev.flush()  # the calls' whole host cost: the last pending ops submitted too

    run.calls = n_calls
    return run


def attention_mode(phase: str, recorded: bool):
    def make(dev, a, b, n_ops):
        return _attention_calls(dev, phase, n_ops, recorded)

    return make


def _measure_once(dev, fn) -> tuple[float, float, object]:
    """One run of `fn`: host seconds (until it returned), wall seconds (until the GPU is done too), counters."""
    gc.collect()
    before = dev.stats.snapshot()
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    dev.sync()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t0, dev.stats.since(before)


MODES = (
    ("raw_wgpu_floor", "raw wgpu-py: prebuilt pipeline + bind group, one pass, one submit", raw_floor),
    ("raw_wgpu_submit_per_op", "raw wgpu-py, one encoder + pass + submit per dispatch",
     raw_submit_per_op),
    ("wgraph_immediate", "wg.ops.scale(out=) per op, then dev.flush(): a submit per PENDING_ITEMS ops", immediate),
    ("wgraph_recorded", "with dev.record(): scale(out=) x N, one submit", recorded),
    ("wgraph_recorded_fresh_outputs", "with dev.record(): y = scale(y) x N (pooled outputs)", recorded_fresh),
    ("wgraph_graph_replay", "compiled wgraph.Graph replay", None),
    ("attention_decode_immediate", "wg.ops.attention(out=), q [1, 8, 64], kv [256, 2, 64], then dev.flush()",
     attention_mode("decode", recorded=False)),
    ("attention_decode_recorded", "the same decode calls x N in one dev.record()", attention_mode("decode", True)),
    ("attention_prefill_immediate", "wg.ops.attention(out=), q [16, 8, 64], kv [16, 2, 64], then dev.flush()",
     attention_mode("prefill", recorded=False)),
    ("attention_prefill_recorded", "the same prefill calls x N in one dev.record()", attention_mode("prefill", True)),
)


def bench_host(dev, n_ops: int = 1000, runs: int = 7, progress=None) -> list[dict]:
    """Rows of µs per dispatch for every mode, with ratios to the raw floor.

    The modes take turns within each run (floor, immediate, recorded, ..., then the next run), so a change
    in the host's speed during the benchmark (clocks, a neighbour on a shared machine) moves them together;
    each ratio is the median over runs of that run's mode / that run's floor, per dispatch."""
    a = dev.tensor(np.ones(ELEMENTS, np.float32), label="bench.a")
    b = dev.tensor(np.ones(ELEMENTS, np.float32), label="bench.b")
    rows, live = [], []  # live: (row, fn) of the modes that built
    for name, what, make in MODES:
        row = {"mode": name, "what": what, "n_ops": n_ops, "runs": runs, "elements": ELEMENTS, "status": "ok",
               "note": ""}
        rows.append(row)
        try:
            if make is None:
                fn, note = graph_replay(dev, a, b, n_ops)
                row["note"] = note
                if fn is None:
                    row["status"] = "skipped"
                    continue
            else:
                fn = make(dev, a, b, n_ops)
                row["n_ops"] = getattr(fn, "calls", n_ops)  # attention rows choose their number of calls
            fn()  # warm: pipelines, bind groups, pool, uniform cache
            dev.sync()
        except Exception as e:  # noqa: BLE001 - one broken mode must not hide the others
            row.update(status="error", note=f"{type(e).__name__}: {e}")
            continue
        live.append((row, fn, {"host_s": [], "wall_s": [], "delta": None}))
    for run in range(runs):
        if progress:
            progress(f"host: run {run + 1} of {runs} over {len(live)} modes ({n_ops} dispatches each)")
        for row, fn, m in live:
            if row["status"] != "ok":
                continue
            try:
                host_s, wall_s, delta = _measure_once(dev, fn)
            except Exception as e:  # noqa: BLE001
                row.update(status="error", note=f"{type(e).__name__}: {e}")
                continue
            m["host_s"].append(host_s)
            m["wall_s"].append(wall_s)
            m["delta"] = delta
    for row, fn, m in live:
        if row["status"] != "ok":
            continue
        d = m["delta"]
        # sync's readback is one submit: not part of the work; the raw loops bypass wgraph's counters
        submits, passes, dispatches = d.submits - 1, d.compute_passes, d.dispatches
        if row["mode"] == "raw_wgpu_floor":
            submits, passes, dispatches = 1, 1, n_ops
        elif row["mode"] == "raw_wgpu_submit_per_op":
            submits, passes, dispatches = n_ops, n_ops, n_ops
        ops = row["n_ops"]
        per_op = max(1, dispatches) / ops  # dispatches one op makes (a split-K decode: 2)
        row.update(
            host_us_per_op=statistics.median(m["host_s"]) / ops * 1e6,
            wall_us_per_op=statistics.median(m["wall_s"]) / ops * 1e6,
            host_us_per_op_min=min(m["host_s"]) / ops * 1e6,
            host_us_per_op_all=[t / ops * 1e6 for t in m["host_s"]],
            submits_per_run=submits, compute_passes_per_run=passes, dispatches_per_run=dispatches,
            dispatches_per_op=per_op,
        )
        row["host_us_per_dispatch"] = row["host_us_per_op"] / per_op
        row["wall_us_per_dispatch"] = row["wall_us_per_op"] / per_op
        row["_per_dispatch_runs"] = ([t / dispatches for t in m["host_s"]], [t / dispatches for t in m["wall_s"]])
    by_mode = {r["mode"]: r for r in rows if r["status"] == "ok"}
    floor, imm = by_mode.get("raw_wgpu_floor"), by_mode.get("wgraph_immediate")
    for r in rows:
        ok = r["status"] == "ok"
        for clock, k in (("host", 0), ("wall", 1)):
            r[f"ratio_to_floor_{clock}"] = (
                statistics.median(x / f for x, f in zip(r["_per_dispatch_runs"][k], floor["_per_dispatch_runs"][k]))
                if ok and floor else None)
        r["speedup_vs_immediate_host"] = (imm["host_us_per_op"] / r["host_us_per_op"]
                                          if ok and imm and not r["mode"].startswith("attention") else None)
    for r in rows:
        r.pop("_per_dispatch_runs", None)
    return rows
