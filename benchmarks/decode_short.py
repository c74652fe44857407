"""Decode attention at short context in a chain (each call reads the previous call's output as q, so the calls are
dependent, as in a decode step): GPU µs per call with the kv length on the GPU (as in a compiled decode step)
and as an int, planned and forced variants, beside a chain of trivial dependent dispatches (the floor). Run from
the project root on a GPU: python benchmarks/decode_short.py [variant,variant,...] (an empty name: planned).
QUICK=1: one shape and length (a lavapipe smoke run). Writes $OUT/decode_short.json (OUT default: .).
decode_split.py times the chunk pass and the combine of the same chains apart (ping_pong, decode_inputs)."""
import json
import os
import statistics
import sys

import numpy as np

import wgraph as wg
from wgraph.bench.timing import calls_us, warm

QUICK = bool(os.environ.get("QUICK"))
SHAPES = ((32, 8, 64), (32, 8, 128))  # (q heads, kv heads, head dim): the 1B and 8B decode shapes


def ping_pong(a, b, op):
    """A call that alternates op(a, b) and op(b, a): each call reads what the one before wrote."""
    state = {"i": 0}

    def call():
        src, dst = (a, b) if state["i"] % 2 == 0 else (b, a)
        state["i"] += 1
        op(src, dst)
    return call


def decode_inputs(dev, rng, hq: int, hkv: int, d: int, cap: int) -> tuple:
    """(k cache, v cache) f16 [cap, hkv, d] and two f32 decode queries [1, hq, d] for ping_pong."""
    kc = dev.tensor((rng.standard_normal((cap, hkv, d)) * 0.5).astype(np.float16))
    vc = dev.tensor(rng.standard_normal((cap, hkv, d)).astype(np.float16))
    qa = dev.tensor(rng.standard_normal((1, hq, d)).astype(np.float32))
    qb = dev.tensor(np.zeros((1, hq, d), np.float32))
    return kc, vc, qa, qb


def floor_call(dev, rng):
    """A chain of trivial dependent dispatches: scale of 4096 floats, ping-pong."""
    x0 = dev.tensor(rng.standard_normal(4096).astype(np.float32))
    x1 = dev.tensor(np.zeros(4096, np.float32))
    return ping_pong(x0, x1, lambda s, d: wg.ops.scale(s, 1.0, out=d))


def main() -> None:
    dev = wg.default_device()
    print(dev.caps.adapter_name, flush=True)
    rng = np.random.default_rng(0)

    def chain_us(call) -> float:
        """GPU µs per call (median of 5 batches of 200 back-to-back calls)."""
        warm(dev, call, 0.3)
        return statistics.median(calls_us(dev, call, 200, batches=5))

    fl = chain_us(floor_call(dev, rng))
    print(f"floor scale chain: {fl:.2f} us", flush=True)
    res = [dict(name="floor", us=fl)]
    variants = sys.argv[1].split(",") if len(sys.argv) > 1 else [""]
    for hq, hkv, d in SHAPES:
        for cap in ((512,) if QUICK else (512, 4096)):
            kc, vc, qa, qb = decode_inputs(dev, rng, hq, hkv, d, cap)
            for L in ((32,) if QUICK else (32, 128, 512, 2048)):
                if L > cap:
                    continue
                kl = dev.tensor(np.array([L], np.uint32))
                for var in variants:
                    for gpu_len in (True, False):
                        klen = kl if gpu_len else L

                        def attend(s, o, var=var, klen=klen):
                            wg.ops.attention(s, kc, vc, causal=True, kv_len=klen, out=o, variant=var or None)
                        try:
                            us = chain_us(ping_pong(qa, qb, attend))
                            plan = wg.ops.attention_plan(qa, kc, vc, causal=True, kv_len=klen, variant=var or None)
                            pv = f"{plan.variant} wg={plan.workgroups} chunks={plan.max_chunks}"
                        except Exception as e:  # a forced variant that does not fit this shape: say why
                            us, pv = None, f"{type(e).__name__}: {str(e)[:100]}"
                        print(f"{hq}/{hkv} D{d} cap {cap:5d} L {L:5d} {'gpu' if gpu_len else 'int'} "
                              f"{var or 'planned':24s} {us if us is None else round(us, 2)!s:>8} us  {pv}", flush=True)
                        res.append(dict(hq=hq, hkv=hkv, d=d, cap=cap, L=L, gpu_len=gpu_len,
                                        variant=var or "planned", us=us, plan=pv))
    with open(os.path.join(os.environ.get("OUT", "."), "decode_short.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
