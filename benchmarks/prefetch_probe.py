"""Does reading the next GEMV's weight into L2 beside the current GEMV pay? (run from the project root on a GPU)

A decode step is a chain of dependent dispatches whose small GEMVs (2-19 MB of weights) run far below the copy
bandwidth: each waits for the one before, then ramps up and waits on DRAM latency with few bytes in flight. A
dispatch that only reads the NEXT call's weight (wgraph/bench/touch_kernel.py: no output anyone reads), recorded
right after the current GEMV, needs no barrier between the two (it shares no written buffer with it), so the GPU
can run it beside the current GEMV on the SMs the GEMV leaves idle; the next GEMV, behind the barrier that its input
puts before it, may then find its weight in L2.

The chain per call: one 1B layer's GEMVs, o_proj [2048, 2048] -> gate+up [16384, 2048] with swiglu -> down
[2048, 8192] -> qkv [3072, 2048], each reading the previous one's output (the next call's o_proj reads this
call's down output); the weights cycle over COPIES layers' worth, so the chain never finds a weight in L2 from a
call before (the H200's L2 is 50 MB). Timed in one pass with two timestamps (wgraph/bench/timing.py calls_us):
 base: the chain alone
 touch_next: after each GEMV, a touch of the next GEMV's weight
 touch_other: after each GEMV, a touch of a buffer of the same size that no GEMV reads (what the extra reads cost
   without any benefit)
Env: TYPES (default Q4_0,f16), REPS (calls a timing, default 48), BATCHES (default 7; the median is printed),
TOUCH_WG (the touch's workgroups, default 264). Writes $OUT/prefetch_probe.json."""
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

import wgraph as wg
from wgraph.bench import quant, report, timing
from wgraph.bench.touch_kernel import BENCH_TOUCH, TouchParams
from wgraph.ops.core import apply

OUT = Path(os.environ.get("OUT", "/tmp/prefetch_probe"))
OUT.mkdir(parents=True, exist_ok=True)
TYPES = os.environ.get("TYPES", "Q4_0,f16").split(",")
REPS = int(os.environ.get("REPS", "48"))
BATCHES = int(os.environ.get("BATCHES", "7"))
TOUCH_WG = int(os.environ.get("TOUCH_WG", "264"))
CACHE_BYTES = 192 << 20
# (name, out_features, in_features, swiglu)
CHAIN = [("o_proj", 2048, 2048, False), ("gate_up", 16384, 2048, True), ("down", 2048, 8192, False),
         ("qkv", 3072, 2048, False)]

dev = wg.default_device()
if not dev.caps.has_timestamps:
    sys.exit(f"{dev.caps.adapter_name} has no timestamp queries")
rng = np.random.default_rng(0)


def make_weight(kind: str, n: int, k: int):
    if kind == "f16":
        return dev.tensor((rng.standard_normal((n, k)) * 0.02).astype(np.float16))
    return quant.random_blocks(kind, n, k, rng).upload(dev)


def weight_tensor(w):
    return w if isinstance(w, wg.Tensor) else w.blocks


def layer_bytes(layer) -> int:
    return sum(weight_tensor(w).nbytes for w in layer)


RES = {"meta": report.machine_meta(dev, ["benchmarks/prefetch_probe.py"]), "reps": REPS, "touch_workgroups": TOUCH_WG,
       "rows": []}
for kind in TYPES:
    first = [make_weight(kind, n, k) for _, n, k, _ in CHAIN]
    copies = max(2, -(-CACHE_BYTES // layer_bytes(first)))
    layers = [first] + [[make_weight(kind, n, k) for _, n, k, _ in CHAIN] for _ in range(copies - 1)]
    others = [dev.tensor(np.zeros(weight_tensor(w).nbytes // 4, np.uint32)) for w in layers[0]]
    x0 = dev.tensor(rng.standard_normal((1, 2048)).astype(np.float32))

    def chain(mode: str):
        # every output stays referenced until its timing is over: a tensor dropped inside the recording could give
        # its buffer to a later output (the pool), and wgpu would then put a barrier before that later dispatch
        state = {"i": 0, "x": x0, "keep": []}

        def call():
            i = state["i"]
            layer, nxt = layers[i % copies], layers[(i + 1) % copies]
            h = state["x"]
            down_out = None
            for j, (name, _, _, swiglu) in enumerate(CHAIN):
                h = wg.ops.linear(h, layer[j], activation="swiglu" if swiglu else None)
                state["keep"].append(h)
                if name == "down":
                    down_out = h
                if mode != "base":
                    target = (weight_tensor(layer[j + 1]) if j + 1 < len(CHAIN) else weight_tensor(nxt[0])) \
                        if mode == "touch_next" else others[(j + 1) % len(CHAIN)]
                    state["keep"].append(apply(BENCH_TOUCH, TouchParams(TOUCH_WG), (target,)))
            state["x"] = down_out
            state["i"] += 1
        call.state = state
        return call

    for mode in ("base", "touch_next", "touch_other"):
        call = chain(mode)
        call()
        dev.sync()
        timing.warm(dev, call, 0.5)
        runs = []
        for _ in range(BATCHES):
            call.state["keep"].clear()
            runs.append(timing.calls_us(dev, call, REPS, batches=1)[0])
        row = {"weights": kind, "mode": mode, "copies": copies, "layer_mb": layer_bytes(first) / 1e6,
               "chain_us": statistics.median(runs), "chain_us_runs": runs}
        RES["rows"].append(row)
        print(f"{kind:5} {mode:12} {row['chain_us']:8.2f} us a layer's 4 GEMVs ({row['layer_mb']:.1f} MB, "
              f"{copies} copies; runs {min(runs):.2f}-{max(runs):.2f})", flush=True)
    (OUT / "prefetch_probe.json").write_text(json.dumps(RES, indent=1, default=str))
print(f"wrote {OUT / 'prefetch_probe.json'}")
