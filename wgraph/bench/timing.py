"""GPU time with two timestamps only: a batch of recorded calls (or one replay of a Program) encoded into ONE
compute pass whose beginning and end are stamped. `record(profile=True)` stamps every dispatch inside its
pass, which is right for where a long kernel's time goes and wrong for a short one: on the H200 each stamped
dispatch read ~10 µs (a linear on an [8, 256] weight: 10.2 µs per call) where a dependent dispatch with no
stamps costs ~2 µs (`../shared/tools/dispatch_chain.py`). `calls_us(..., stamped=True)` measures that way too,
so one run shows both."""

from __future__ import annotations

import statistics
import struct
import time

import attrs
import wgpu

from wgraph import args
from wgraph.bench import warmup
from wgraph.scheduler import profiling
from wgraph.scheduler.commands import Copy
from wgraph.scheduler.recording import Recording


def _span_of_steps(dev, steps, offsets) -> float:
    """GPU µs from the start to the end of one pass holding `steps` (a prepared list's dispatches, with their
    uniform offsets)."""
    if any(isinstance(s, Copy) for s in steps) or len(steps) != len(offsets):
        raise ValueError("a timed command list must hold dispatches only (a copy or write would end the pass)")
    query = dev.wgpu.create_query_set(type=wgpu.QueryType.timestamp, count=2)
    usage = wgpu.BufferUsage
    resolve = dev.wgpu.create_buffer(size=16, usage=usage.QUERY_RESOLVE | usage.COPY_SRC)
    readback = dev.wgpu.create_buffer(size=16, usage=usage.MAP_READ | usage.COPY_DST)
    encoder = dev.wgpu.create_command_encoder()
    cpass = encoder.begin_compute_pass(timestamp_writes={
        "query_set": query, "beginning_of_pass_write_index": 0, "end_of_pass_write_index": 1})
    for step, offset in zip(steps, offsets):
        d, pipeline, group = step[0], step[1], step[2]
        cpass.set_pipeline(pipeline)
        cpass.set_bind_group(0, group, [] if offset is None else [offset])
        if d.indirect is not None:
            cpass.dispatch_workgroups_indirect(d.indirect[0].buffer, d.indirect[1])
        else:
            cpass.dispatch_workgroups(*d.workgroups)
    cpass.end()
    encoder.resolve_query_set(query, 0, 2, resolve, 0)
    encoder.copy_buffer_to_buffer(resolve, 0, readback, 0, 16)
    index = dev.scheduler.submit(encoder.finish())
    readback.map_sync(wgpu.MapMode.READ)
    dev.scheduler.completed(index)  # the map waited for it
    begin, end = struct.unpack("<2Q", readback.read_mapped())
    readback.unmap()
    for b in (resolve, readback):
        b.destroy()
    query.destroy()
    # raw ticks (wgpu-native normalizes none by default): times the tick's nanoseconds (52 on Intel, 1 on NVIDIA)
    return max(0, end - begin) * profiling.timestamp_period_ns(dev.wgpu) / 1000.0


def _recorded(dev, call, reps: int) -> Recording:
    rec = Recording(dev.scheduler, dev.caps, label="bench.timing")
    dev.scheduler.push_recording(rec)
    try:
        for _ in range(reps):
            call()
    finally:
        dev.scheduler.pop_recording(rec)
    return rec


def calls_us(dev, call, reps: int, batches: int = 3, *, stamped: bool = False) -> list[float] | None:
    """GPU µs per call, one value per batch of `reps` back-to-back calls (in one pass: each call that writes
    what the previous one wrote waits for it, as in a decode step). None without timestamp queries.
    `stamped`: time with a timestamp pair around every dispatch (record(profile=True)) instead."""
    if not dev.caps.has_timestamps:
        return None
    dev.flush()
    out = []
    for _ in range(batches):
        if stamped:
            with dev.record(profile=True) as rec:
                for _ in range(reps):
                    call()
            out.append(rec.profile().span_us / reps)
            continue
        rec = _recorded(dev, call, reps)
        with dev.lock:
            prepared = rec.commands.prepare()
            try:
                out.append(_span_of_steps(dev, prepared.steps, prepared.offsets) / reps)
            finally:
                prepared.release()
    return out


def kernel_subsets_us(dev, call, reps: int, subsets: dict, batches: int = 5) -> dict | None:
    """Where a call's GPU time goes: `reps` back-to-back calls recorded once, then for each name of `subsets`
    only the dispatches whose kernel name `subsets[name]` accepts, timed in one pass (median of `batches`):
    {name: (GPU µs per call, dispatches per call)}. Dispatches that write one buffer keep waiting for each other
    in a subset (wgpu puts a barrier between them), so a subset of a chain is a chain. None without timestamp
    queries. The call's uploads must have happened before (run it once and sync): a timed list holds dispatches
    only."""
    if not dev.caps.has_timestamps:
        return None
    dev.flush()
    rec = _recorded(dev, call, reps)
    out = {}
    with dev.lock:
        prepared = rec.commands.prepare()
        try:
            for name, accept in subsets.items():
                keep = [i for i, step in enumerate(prepared.steps) if accept(step[0].kernel.name)]
                steps = [prepared.steps[i] for i in keep]
                offsets = [prepared.offsets[i] for i in keep]
                spans = [_span_of_steps(dev, steps, offsets) / reps for _ in range(batches)]
                out[name] = (statistics.median(spans), len(keep) // reps)
        finally:
            prepared.release()
    return out


def program_us(prog) -> float | None:
    """GPU µs of one replay of a Program without inputs (every node in one stamped pass; its state advances
    as in a run). None without timestamp queries."""
    dev = prog.device
    if not dev.caps.has_timestamps:
        return None
    with dev.lock:
        dev.flush()
        prog._commands._flush_uniforms()  # dirty uniform bytes, as a run writes them
        return _span_of_steps(dev, prog._commands.steps, prog._commands.offsets)


def warm(dev, call, seconds: float) -> None:
    """Bring the GPU's clocks up before `call` is timed: `seconds` of steady copies (warmup.steady_work), then
    `call` twice (its pipelines, bind groups and uniforms). Repeating the call itself does not raise them: an H100
    idle at 345 MHz stayed there through 0.3 s of a 6 µs quantized GEMV recorded 20 calls a time (the host's
    recording left the GPU idle most of the time), which then read 24.5 µs against 6.0 after a second of copies
    (benchmarks/results/h100-cold-probe-1207.log); the host's preparation of a shape leaves the GPU idle."""
    if dev.caps.is_cpu:
        return
    warmup.steady_work(dev, seconds)
    call()
    call()
    dev.sync()


def reps_for(dev, call, target_s: float, max_reps: int) -> tuple[float, int]:
    """One call's wall seconds (the GPU idle before it and waited for after it) and the calls a batch takes to
    last about `target_s`, 1 to `max_reps`: the bench's timers size their batches from it, so a slow
    configuration is timed in a few calls, not in a fixed count of them."""
    dev.sync()
    t0 = time.perf_counter()
    call()
    dev.sync()
    once = time.perf_counter() - t0
    return once, int(max(1, min(max_reps, target_s / max(once, 1e-6))))


def time_calls(dev, call, target_s: float, max_reps: int, warm_s: float = 0.3) -> tuple[float, int, str]:
    """GPU µs per call (median of batches of back-to-back calls, after `warm_s` seconds of them: an idle GPU's
    clocks take a while to rise), reps per batch, and the clock used. Batches are sized from one call's time,
    so a slow configuration warms in a few calls, not in a fixed count of them."""
    _, reps = reps_for(dev, call, target_s, max_reps)
    warm(dev, call, warm_s)
    gpu = calls_us(dev, call, reps)
    if gpu:
        return statistics.median(gpu), reps, "pass-span"
    return wall_us(dev, call, reps), reps, "wall+sync"


def wall_us(dev, call, reps: int) -> float:
    """Wall µs per call: `reps` calls in one recording, submitted, then a GPU wait (the clock where there are no
    timestamp queries)."""
    dev.sync()
    t0 = time.perf_counter()
    with dev.record():
        for _ in range(reps):
            call()
    dev.sync()
    return (time.perf_counter() - t0) / reps * 1e6


# The one replay timer (the bench's decode and batched rows, benchmarks/ab_timing.py's A/B scripts): a Program's
# replays submitted back to back through Program.run_many's in-flight window (a fence wait for the oldest of
# REPLAY_IN_FLIGHT, never a readback), then one GPU wait. A readback between replays (what the bench did before
# 2026-12-06: dev.sync() every 4 runs of 20 calls) leaves the GPU idle through each round trip: on an H100 it
# added ~10 µs to every decode call of the grid (28.4 against 19.1 µs at kv 4096, 32/8 D128).
REPLAY_IN_FLIGHT = 8
REPLAY_CALLS = 20   # calls a replayed Program records (the bench tables say so)


@attrs.frozen
class ReplayTime:
    """A replay's wall µs per call and the host's share of it: its encode and submit µs per call in the same
    replays. The host works while the GPU runs earlier replays (the in-flight window), so the wall time is the
    GPU's where the host's is under 0.8 of it (gpu_bound), else the host sets the pace and the wall time says
    nothing of the kernels."""

    us_per_call: float
    host_us_per_call: float

    @property
    def gpu_bound(self) -> bool:
        return self.host_us_per_call < 0.8 * self.us_per_call


def compile_calls(dev, build, calls: int, name: str = "bench_replay"):
    """A Program of `calls` calls: `build(graph, i)` adds call i and returns its value (each call an output).
    ArgumentError for fewer than 1 call (a Program of none has nothing to time)."""
    import wgraph as wg

    calls = args.integer("compile_calls", "calls", calls, 1)
    g = wg.Graph(name)
    for i in range(calls):
        g.output(f"out{i}", build(g, i))
    return g.compile(dev)


def states(g, arrays, dtypes) -> list:
    """Graph states in0, in1, ... initialised to `arrays` with `dtypes` (a replayed call's inputs, kept on the GPU)."""
    return [g.state(f"in{i}", a.shape, d, init=a) for i, (a, d) in enumerate(zip(arrays, dtypes))]


def replay_time(dev, prog, calls: int, min_s: float = 0.1, warm_s: float = 0.2) -> ReplayTime:
    """Wall µs per call of `prog` (which holds `calls` calls) replayed back to back for about `min_s` seconds,
    after `warm_s` seconds of untimed replays (an idle GPU's clocks take a while to rise); at least 3 replays
    are timed. No timestamps between dispatches: GPU time as torch's CUDA-event loop measures it. `calls` < 1 is an
    ArgumentError (it divides the time: a Program of 0 calls was a ZeroDivisionError after its replays)."""
    calls = args.integer("replay_time", "calls", calls, 1)
    prog.run()
    dev.sync()
    t0 = time.perf_counter()
    runs = 0
    while time.perf_counter() - t0 < warm_s or runs == 0:
        prog.run_many(4, in_flight=REPLAY_IN_FLIGHT)
        runs += 4
    dev.sync()
    per_run = (time.perf_counter() - t0) / runs
    reps = max(3, int(min_s / max(per_run, 1e-6)))
    t0 = time.perf_counter()
    host = prog.run_many(reps, in_flight=REPLAY_IN_FLIGHT)
    dev.sync()
    wall = time.perf_counter() - t0
    return ReplayTime(wall / (reps * calls) * 1e6, host / (reps * calls) * 1e6)


def replay(dev, build, calls: int = REPLAY_CALLS, min_s: float = 0.1) -> ReplayTime:
    """replay_time of a Program of `calls` calls made by compile_calls(dev, build, calls)."""
    return replay_time(dev, compile_calls(dev, build, calls), calls, min_s)
