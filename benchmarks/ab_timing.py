"""The A/B scripts' two timings of a call (attention_ab.py, decode_ablation.py; run from the project root, which puts
this folder on sys.path): `span` = back-to-back calls in one recording with timestamps around every dispatch (the
first dispatch's start to the last one's end, and each kernel's time), and `replay` = a compiled Program of n calls
replayed back to back, timed by the wall clock (no timestamps; GPU-bound, as torch's CUDA-event loop is)."""
import statistics
import time

import wgraph as wg


def span_us(dev, call, n: int, warm_s: float = 0.2):
    """(median span / n over 3 recordings, per-label µs per call): timestamps around every dispatch."""
    call()
    dev.sync()
    until = time.perf_counter() + warm_s
    while time.perf_counter() < until:
        with dev.record():
            for _ in range(n):
                call()
        dev.sync()
    spans, kern = [], {}
    for _ in range(3):
        with dev.record(profile=True) as rec:
            for _ in range(n):
                call()
        prof = rec.profile()
        spans.append(prof.span_us / n)
        kern = {r.label.split(".")[-1]: round(r.total_us / n, 2) for r in prof.rows}
    return statistics.median(spans), kern


def compile_calls(dev, build, n: int, name: str = "ab"):
    """A Program of `n` calls: `build(graph, i)` adds call i and returns its value (each call an output)."""
    g = wg.Graph(name)
    for i in range(n):
        g.output(f"o{i}", build(g, i))
    return g.compile(dev)


def replay_prog_us(dev, prog, n: int, min_s: float = 0.15, warm_s: float = 0.2):
    """Wall µs per call of `prog` (`n` calls) replayed back to back after `warm_s` of replays; and whether the host
    kept the GPU fed (submit time < wall)."""
    prog.run()
    dev.sync()
    t0 = time.perf_counter()
    runs = 0
    while time.perf_counter() - t0 < warm_s:
        prog.run()
        runs += 1
        if runs % 4 == 0:
            dev.sync()
    dev.sync()
    per_run = (time.perf_counter() - t0) / max(runs, 1)
    reps = max(3, int(min_s / max(per_run, 1e-6)))
    t0 = time.perf_counter()
    for _ in range(reps):
        prog.run()
    t_submit = time.perf_counter() - t0
    dev.sync()
    wall = time.perf_counter() - t0
    return wall / (reps * n) * 1e6, t_submit < 0.8 * wall


def replay_us(dev, build, n: int, min_s: float = 0.15):
    """replay_prog_us of a Program of `n` calls made by compile_calls(dev, build, n)."""
    return replay_prog_us(dev, compile_calls(dev, build, n), n, min_s)


def states(g, arrays, dtypes):
    """Graph states s0, s1, ... initialised to `arrays` (a Program's inputs that stay on the GPU)."""
    return [g.state(f"s{i}", a.shape, d, init=a) for i, (a, d) in enumerate(zip(arrays, dtypes))]
