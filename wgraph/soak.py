"""Soak: many replays of a compiled decode step and many immediate attention calls, sampling the live GPU
buffers (dev.stats.live_buffers) and the process RSS. PASS when both stay flat after warm-up: no live buffer
more, RSS within 4 MiB (exit code 0; FAIL: 1). With the defaults, about 2 minutes on lavapipe
(2 CPU cores); progress on stderr while it runs.
`python -m wgraph soak [--steps N] [--calls N] [--every N] [--warmup N]`."""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from wgraph.cli_format import DefaultsFormatter, unwritable
from wgraph.dtypes import dtype_info

HQ, HKV, D, CAPACITY = 4, 2, 32, 256
RSS_MARGIN_BYTES = 4 << 20  # allocator noise; a leak of a buffer's worth per call would be far above it


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; else the peak from getrusage)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        # ru_maxrss is in bytes on macOS, KiB elsewhere: times 1024 there, 4 KiB of growth read as 4 MiB (FAIL)
        unit = 1 if sys.platform == "darwin" else 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit


def kv_dtype(dev) -> str:
    """The K/V dtype the soak runs: f16, a model's cache, where the device has shader-f16; else f32."""
    return "f16" if dev.caps.has_f16 else "f32"


def decode_step_graph(kv: str = "f16"):
    """One decode step: append k/v (dtype `kv`) at `pos` into a ring cache (program state), attend with kv_len
    from the GPU over the newest CAPACITY keys (the ring's: a window wider than the ring is reported)."""
    import wgraph as wg

    g = wg.Graph("soak_decode")
    q = g.input("q", (1, HQ, D), "f32")
    k_new, v_new = g.input("k_new", (1, HKV, D), kv), g.input("v_new", (1, HKV, D), kv)
    pos, kv_len = g.input("pos", (1,), "u32"), g.input("kv_len", (1,), "u32")
    kc, vc = g.state("k_cache", (CAPACITY, HKV, D), kv), g.state("v_cache", (CAPACITY, HKV, D), kv)
    wg.ops.kv_append((kc, vc), k_new, v_new, pos, layout="ring")
    g.output("out", wg.ops.attention(q, kc, vc, causal=True, kv_len=kv_len, kv_layout="ring",
                                     sliding_window=CAPACITY))
    return g


def _sample(samples, i, dev):
    samples.append((i, dev.stats.live_buffers, rss_bytes()))


def _tell(shown, samples):
    if shown is not None:
        shown.update(samples[-1][0] - (samples[-2][0] if len(samples) > 1 else 0))


def soak_replay(dev, steps: int, every: int = 100, shown=None) -> list[tuple[int, int, int]]:
    """`steps` replays of the compiled decode step (new q/k/v and position each step); samples every `every`.
    `shown`: a progress counter (wgraph.progress.bar) told of each sample's steps."""
    rng = np.random.default_rng(0)
    kv_type = kv_dtype(dev)
    prog = decode_step_graph(kv_type).compile(dev)
    q = rng.standard_normal((16, 1, HQ, D)).astype(np.float32)
    kv = rng.standard_normal((16, 2, 1, HKV, D)).astype(dtype_info(kv_type).numpy)
    samples = []
    for t in range(steps):
        out = prog.run(q=q[t % 16], k_new=kv[t % 16, 0], v_new=kv[t % 16, 1], pos=t, kv_len=t + 1)["out"]
        if t % every == every - 1 or t == 0 or t == steps - 1:   # the last step too: the growth ends there
            assert np.isfinite(out.numpy()).all()   # the readback also waits for the GPU and lets the pool collect
            _sample(samples, t + 1, dev)
            _tell(shown, samples)
    return samples


def soak_immediate(dev, calls: int, every: int = 100, shown=None) -> list[tuple[int, int, int]]:
    """`calls` immediate attention calls with fresh outputs and kv_len cycling over 300 values (300 op
    templates and uniform contents; the calls share pending lists, whose arenas come from the pool)."""
    import wgraph as wg

    rng = np.random.default_rng(0)
    Q = dev.tensor(rng.standard_normal((1, HQ, D)).astype(np.float32))
    kv_numpy = dtype_info(kv_dtype(dev)).numpy
    K = dev.tensor(rng.standard_normal((300, HKV, D)).astype(kv_numpy))
    V = dev.tensor(rng.standard_normal((300, HKV, D)).astype(kv_numpy))
    samples = []
    for i in range(calls):
        out = wg.ops.attention(Q, K, V, causal=True, kv_len=1 + (i * 7) % 300)
        if i % every == every - 1 or i == 0 or i == calls - 1:
            assert np.isfinite(out.numpy()).all()
            _sample(samples, i + 1, dev)
            _tell(shown, samples)
    return samples


def growth_after(samples, warmup: int) -> tuple[int, int]:
    """(live buffer growth, RSS growth in bytes) from the first sample at or after `warmup` to the last."""
    base = next(s for s in samples if s[0] >= warmup)
    last = samples[-1]
    return last[1] - base[1], last[2] - base[2]


def verdict(runs: dict, warmup: int) -> tuple[bool, str]:
    """The flat-memory criteria over every run's samples: (passed, one line saying why)."""
    failures, growth = [], []
    for name, samples in runs.items():
        buffers, rss = growth_after(samples, warmup)
        growth.append(f"{name}: live buffers {buffers:+d}, RSS {rss / 2**20:+.2f} MiB")
        if buffers > 0:
            failures.append(f"{name} holds {buffers} more live GPU buffers after warm-up (allowed: 0)")
        if rss > RSS_MARGIN_BYTES:
            failures.append(f"{name} grew RSS by {rss / 2**20:.2f} MiB after warm-up (allowed: "
                            f"{RSS_MARGIN_BYTES / 2**20:.0f} MiB)")
    if failures:
        return False, "FAIL: " + "; ".join(failures)
    return True, f"PASS: flat after warm-up ({'; '.join(growth)}; RSS allowed +{RSS_MARGIN_BYTES / 2**20:.0f} MiB)"


def _row(name, n, samples, warmup, seconds):
    first, base, last = samples[0], next(s for s in samples if s[0] >= warmup), samples[-1]
    mib = lambda b: f"{b / 2**20:.1f}"  # noqa: E731
    return (f"| {name} | {n} | {first[1]} | {base[1]} | {last[1]} | {mib(first[2])} | {mib(base[2])} | "
            f"{mib(last[2])} | {seconds:.1f} |")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m wgraph soak", description=__doc__,
                                 formatter_class=DefaultsFormatter)
    ap.add_argument("--steps", type=int, default=10_000, help="replays of the compiled decode step")
    ap.add_argument("--calls", type=int, default=10_000, help="immediate attention calls")
    ap.add_argument("--every", type=int, default=500, help="take a sample (live buffers, RSS) every N steps or calls")
    ap.add_argument("--warmup", type=int, default=1000, help="steps (and calls) before this count are warm-up: "
                    "growth is measured from the first sample at or after it")
    ap.add_argument("--write-doc", metavar="PATH", help=argparse.SUPPRESS)  # maintainers: rewrite "## Soak" in PATH
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.every < 1:
        ap.error(f"--every {args.every} must be at least 1")
    if args.warmup < 0:
        ap.error(f"--warmup {args.warmup} must be at least 0")
    for name, n in (("--steps", args.steps), ("--calls", args.calls)):
        if n < 2:   # said before the warm-up's rule, which blamed the warm-up for --steps -5
            ap.error(f"{name} {n} must be at least 2 (growth is measured between two samples: after the first "
                     f"and the last)")
        # growth is measured from the first sample at or after the warm-up to the last (samples after the first
        # step, every `every` and after the last): the first must come before the last
        first_after = 1 if args.warmup <= 1 else -(-args.warmup // args.every) * args.every
        if first_after >= n:
            ap.error(f"{name} {n} leaves no sample after the warm-up of {args.warmup} to measure growth from (samples "
                     f"every {args.every} and at the end): give more {name}, or a shorter --warmup or --every")
    if args.write_doc is not None:
        why = unwritable(args.write_doc)   # found after the run, its traceback came before the verdict
        if why:
            ap.error(f"--write-doc {args.write_doc or repr(args.write_doc)}: {why}")
    import wgraph as wg
    from wgraph import progress

    dev = wg.default_device()
    print(f"soak on {dev.caps.adapter_name}: {args.steps} replays, then {args.calls} immediate calls", file=sys.stderr)
    t0 = time.perf_counter()
    with progress.bar(args.steps, "soak: compiled decode step", "steps", lines=True) as shown:
        replay = soak_replay(dev, args.steps, args.every, shown=shown)
    t1 = time.perf_counter()
    with progress.bar(args.calls, "soak: immediate attention", "calls", lines=True) as shown:
        immediate = soak_immediate(dev, args.calls, args.every, shown=shown)
    t2 = time.perf_counter()
    lines = ["| run | count | live buffers: start | after warm-up | end | RSS MiB: start | after warm-up | end | seconds |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
             _row("compiled decode step, replayed", args.steps, replay, args.warmup, t1 - t0),
             _row("immediate attention", args.calls, immediate, args.warmup, t2 - t1)]
    table = "\n".join(lines)
    print(f"device: {dev.caps.adapter_name}\n{table}")
    if args.write_doc is not None:
        _write_doc(args.write_doc, dev.caps.adapter_name, table, args)
    passed, line = verdict({"replay": replay, "immediate": immediate}, args.warmup)
    print(line)
    return 0 if passed else 1


def _write_doc(path: str, adapter: str, table: str, args) -> None:
    section = (f"## Soak\n\n`python -m wgraph soak --steps {args.steps} --calls {args.calls}` "
               f"(progress on stderr while it runs; `wgraph/soak.py`; the CI version, 300 replays and 600 calls, is `tests/test_soak.py`) on {adapter}. "
               f"The decode step is a compiled graph (kv_append into a {CAPACITY}-row ring cache held as program "
               f"state, then attention over its newest {CAPACITY} keys, sliding_window {CAPACITY}, with kv_len read "
               f"from the GPU), replayed with new q/k/v and position each "
               f"step; the immediate run calls `attention` with a fresh output and kv_len cycling over 300 values "
               f"(300 op templates and uniform contents). Live GPU buffers are "
               f"`dev.stats.live_buffers` (created minus destroyed, pool included); RSS from /proc/self/statm; "
               f"a readback every {args.every} steps; warm-up is the first {args.warmup}. The run ends with a "
               f"verdict line: PASS (exit code 0) when, after warm-up, no run holds one more live buffer and RSS "
               f"grew by at most {RSS_MARGIN_BYTES >> 20} MiB; FAIL (exit code 1) naming the run and the growth "
               f"otherwise (a warm-up shorter than the 300 lengths' first pass may fail by design).\n\n{table}\n")
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    start = text.find("\n## Soak\n")
    if start >= 0:
        end = text.find("\n## ", start + 1)
        text = text[:start + 1] + section + (text[end:] if end >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    sys.exit(main())
