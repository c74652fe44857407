"""Where a short-context decode attention call's time goes: one recorded chain of calls (each reads the previous
call's output as q), timed whole, then only its main (chunk) kernels, then only its combine kernels. wgpu puts a
barrier between dispatches that write one buffer, so each subset is still a dependent chain. Beside it the floor:
a chain of trivial dependent dispatches. Run from the project root on a GPU: python benchmarks/decode_split.py
(WARM_S: seconds of warm-up calls per measurement, default 0.3; QUICK=1: one shape and length, for lavapipe)."""
import os
import statistics
import types

import numpy as np

import wgraph as wg
from wgraph.bench.timing import _recorded, _span_of_steps, warm

QUICK = bool(os.environ.get("QUICK"))
WARM_S = float(os.environ.get("WARM_S", "0.3"))
REPS = 200
dev = wg.default_device()
rng = np.random.default_rng(0)


def timed(call, keep: dict) -> dict:
    """{name: (GPU µs per call of the steps whose kernel name `keep[name]` accepts, dispatches per call)}."""
    call()
    dev.sync()  # the first call's uploads happen outside the recording (a timed list holds dispatches only)
    warm(dev, call, WARM_S)
    rec = _recorded(dev, call, REPS)
    out = {}
    with dev.lock:
        prepared = rec.commands.prepare()
        try:
            for name, accept in keep.items():
                idx = [i for i, s in enumerate(prepared.steps) if accept(s[0].kernel.name)]
                subset = types.SimpleNamespace(steps=[prepared.steps[i] for i in idx],
                                               offsets=[prepared.offsets[i] for i in idx])
                out[name] = (statistics.median(_span_of_steps(dev, subset) / REPS for _ in range(5)), len(idx) // REPS)
        finally:
            prepared.release()
    return out


def ping_pong(a, b, op):
    """A call that alternates op(a -> b) and op(b -> a)."""
    state = {"i": 0}

    def call():
        src, dst = (a, b) if state["i"] % 2 == 0 else (b, a)
        state["i"] += 1
        op(src, dst)
    return call


x0, x1 = dev.tensor(rng.standard_normal(4096).astype(np.float32)), dev.tensor(np.zeros(4096, np.float32))
print("floor", timed(ping_pong(x0, x1, lambda s, d: wg.ops.scale(s, 1.0, out=d)), {"all": lambda n: True}), flush=True)
for hq, hkv, d in ((32, 8, 64),) if QUICK else ((32, 8, 64), (32, 8, 128)):
    cap = 512
    kc = dev.tensor((rng.standard_normal((cap, hkv, d)) * 0.5).astype(np.float16))
    vc = dev.tensor(rng.standard_normal((cap, hkv, d)).astype(np.float16))
    qa = dev.tensor(rng.standard_normal((1, hq, d)).astype(np.float32))
    qb = dev.tensor(np.zeros((1, hq, d), np.float32))
    for L in (32,) if QUICK else (32, 128, 512):
        kl = dev.tensor(np.array([L], np.uint32))
        call = ping_pong(qa, qb, lambda s, o: wg.ops.attention(s, kc, vc, causal=True, kv_len=kl, out=o))
        r = timed(call, {"all": lambda n: True, "main": lambda n: "combine" not in n,
                         "combine": lambda n: "combine" in n})
        print(f"{hq}/{hkv} D{d} L {L}: " + "  ".join(f"{k} {v[0]:.2f} us ({v[1]} disp)" for k, v in r.items()),
              flush=True)
