"""Decode attention at short context in a chain (each call reads the previous call's output as q, so the calls are
dependent, as in a decode step): GPU µs per call with the kv length on the GPU (as in a compiled decode step)
and as an int, planned and forced variants, beside a chain of trivial dependent dispatches (the floor). Run from
the project root on a GPU: python benchmarks/decode_short.py [variant,variant,...] (an empty name: planned).
QUICK=1: one shape and length (a lavapipe smoke run). Writes $OUT/decode_short.json (OUT default: .)."""
import json
import os
import statistics
import sys

import numpy as np

import wgraph as wg
from wgraph.bench.timing import calls_us, warm

QUICK = bool(os.environ.get("QUICK"))
dev = wg.default_device()
print(dev.caps.adapter_name, flush=True)
rng = np.random.default_rng(0)
res = []


def chain(call_ab):
    """GPU µs per call of call_ab(0), call_ab(1), call_ab(0), ... (median of 5 batches of 200)."""
    state = {"i": 0}

    def call():
        call_ab(state["i"] % 2)
        state["i"] += 1
    warm(dev, call, 0.3)
    return statistics.median(calls_us(dev, call, 200, batches=5))


a = dev.tensor(rng.standard_normal(4096).astype(np.float32))
b = dev.tensor(np.zeros(4096, np.float32))


def scale_chain(i):
    src, dst = (a, b) if i == 0 else (b, a)
    wg.ops.scale(src, 1.0, out=dst)


fl = chain(scale_chain)
print(f"floor scale chain: {fl:.2f} us", flush=True)
res.append(dict(name="floor", us=fl))

variants = sys.argv[1].split(",") if len(sys.argv) > 1 else [""]
for hq, hkv, d in ((32, 8, 64), (32, 8, 128)):
    for cap in ((512,) if QUICK else (512, 4096)):
        kc = dev.tensor((rng.standard_normal((cap, hkv, d)) * 0.5).astype(np.float16))
        vc = dev.tensor(rng.standard_normal((cap, hkv, d)).astype(np.float16))
        qa = dev.tensor(rng.standard_normal((1, hq, d)).astype(np.float32))
        qb = dev.tensor(np.zeros((1, hq, d), np.float32))
        for L in ((32,) if QUICK else (32, 128, 512, 2048)):
            if L > cap:
                continue
            kl = dev.tensor(np.array([L], np.uint32))
            for var in variants:
                for gpu_len in (True, False):
                    klen = kl if gpu_len else L

                    def attend(i, var=var, klen=klen):
                        src, dst = (qa, qb) if i == 0 else (qb, qa)
                        wg.ops.attention(src, kc, vc, causal=True, kv_len=klen, out=dst, variant=var or None)
                    try:
                        us = chain(attend)
                        plan = wg.ops.attention_plan(qa, kc, vc, causal=True, kv_len=klen, variant=var or None)
                        pv = f"{plan.variant} wg={plan.workgroups} chunks={plan.max_chunks}"
                    except Exception as e:  # a forced variant that does not fit this shape: say why
                        us, pv = None, f"{type(e).__name__}: {str(e)[:100]}"
                    print(f"{hq}/{hkv} D{d} cap {cap:5d} L {L:5d} {'gpu' if gpu_len else 'int'} {var or 'planned':24s} "
                          f"{us if us is None else round(us, 2)!s:>8} us  {pv}", flush=True)
                    res.append(dict(hq=hq, hkv=hkv, d=d, cap=cap, L=L, gpu_len=gpu_len, variant=var or "planned", us=us,
                                    plan=pv))
with open(os.path.join(os.environ.get("OUT", "."), "decode_short.json"), "w") as f:
    json.dump(res, f, indent=1)
