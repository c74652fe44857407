"""The A/B scripts' two timings of a call (attention_ab.py, decode_ablation.py; run from the project root, which puts
this folder on sys.path): `span` = back-to-back calls in one recording with timestamps around every dispatch (the
first dispatch's start to the last one's end, and each kernel's time); `replay` is the bench's timer
(wgraph.bench.timing.replay_time: a compiled Program of n calls replayed back to back, timed by the wall clock)."""
import statistics
import time


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
