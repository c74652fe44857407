"""Where a short-context decode attention call's time goes: one recorded chain of calls (decode_short.py's: each
reads the previous call's output as q), timed whole, then only its main (chunk) kernels, then only its combine
kernels (wgraph.bench.timing.kernel_subsets_us). Beside it the floor: a chain of trivial dependent dispatches.
Run from the project root on a GPU: python benchmarks/decode_split.py (WARM_S: seconds of warm-up calls per
measurement, default 0.3; QUICK=1: one shape and length, for lavapipe)."""
import os

import numpy as np

import wgraph as wg
from decode_short import SHAPES, decode_inputs, floor_call, ping_pong
from wgraph.bench.timing import kernel_subsets_us, warm

QUICK = bool(os.environ.get("QUICK"))
WARM_S = float(os.environ.get("WARM_S", "0.3"))
REPS = 200
ALL = {"all": lambda name: True}
PASSES = {**ALL, "main": lambda name: "combine" not in name, "combine": lambda name: "combine" in name}


def main() -> None:
    dev = wg.default_device()
    rng = np.random.default_rng(0)

    def timed(call, subsets: dict) -> dict:
        call()
        dev.sync()  # the first call's uploads happen outside the recording
        warm(dev, call, WARM_S)
        return kernel_subsets_us(dev, call, REPS, subsets)

    print("floor", timed(floor_call(dev, rng), ALL), flush=True)
    for hq, hkv, d in SHAPES[:1] if QUICK else SHAPES:
        kc, vc, qa, qb = decode_inputs(dev, rng, hq, hkv, d, 512)
        for L in (32,) if QUICK else (32, 128, 512):
            kl = dev.tensor(np.array([L], np.uint32))
            call = ping_pong(qa, qb, lambda s, o: wg.ops.attention(s, kc, vc, causal=True, kv_len=kl, out=o))
            r = timed(call, PASSES)
            print(f"{hq}/{hkv} D{d} L {L}: " + "  ".join(f"{k} {v[0]:.2f} us ({v[1]} disp)" for k, v in r.items()),
                  flush=True)


if __name__ == "__main__":
    main()
