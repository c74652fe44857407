"""The quantized decode on a CPU adapter (lavapipe): each one-row GEMV of a SmolLM2-135M-shaped Llama as planned
(Q8_0 and Q4_0 weights: 30 layers, hidden 576, intermediate 1536, 9/3 heads, vocab 49152, tied embeddings), then
that model's greedy decode (seeded random weights quantized by wgraph's quantizer), milliseconds a token.

    python benchmarks/quant_cpu.py [FORMAT ...]        # default: Q8_0 Q4_0
    ROWS=8 MODEL=0 python benchmarks/quant_cpu.py Q8_0 # the GEMVs with 8 rows of x (a prompt's chunk), no model

Each time is the best of ROUNDS (default 3) timings of CALLS calls (3), the kernels of the run timed in turns. To
compare two revisions, run it under each in turns with the other tree first on the path (the copy of this file in
either tree will do): `PYTHONPATH=/tmp/base python benchmarks/quant_cpu.py` (it prints the wgraph it imported).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

ROUNDS = int(os.environ.get("ROUNDS", "3"))
CALLS = int(os.environ.get("CALLS", "3"))
ROWS = int(os.environ.get("ROWS", "1"))
MODEL = os.environ.get("MODEL", "1") == "1"


def best_of(fn) -> float:
    fn()  # the first call compiles
    best = float("inf")
    for _ in range(ROUNDS):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def kernels(dev, cfg, fmt: str, rng) -> None:
    import wgraph as wg
    from wgraph.bench.gemv import decode_shapes, model_dims
    from wgraph.ggml_blocks import quantize
    from wgraph.ops.quantized import plan_linear_q

    # the decode step's GEMVs (q + k + v, o, gate + up, down, the lm_head), unfused here
    for n, k in [(s.out_features, s.in_features) for s in decode_shapes("SmolLM2-135M", model_dims(cfg))]:
        qw = quantize((rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32), fmt)
        w, x = qw.upload(dev), dev.tensor(rng.standard_normal((ROWS, k)).astype(np.float32))

        def calls():
            for _ in range(CALLS):
                y = wg.ops.linear(x, w)
            y.numpy()

        variant = plan_linear_q(ROWS, n, k, fmt, caps=dev.caps).variant
        print(f"{fmt} [{n}, {k}] {ROWS} row(s)  {variant:28s} {best_of(calls) / CALLS * 1e3:8.2f} ms", flush=True)


def model(dev, cfg, fmt: str) -> None:
    from wgraph.bench.model import seeded_host_weights
    from wgraph.bench.quant import quantize_weights
    from wgraph.models.quantized import QuantizedLlama

    m = QuantizedLlama.from_weights(cfg, quantize_weights(seeded_host_weights(cfg), fmt, 1), dev, max_seq=64)
    tokens = 16
    t = best_of(lambda: m.generate([1, 2, 3], tokens))
    print(f"{fmt} model: {tokens} tokens after a 3-token prompt in {t:.3f} s, {t / tokens * 1e3:.1f} ms a token",
          flush=True)


def main() -> None:
    import wgraph as wg
    from wgraph.bench.model import SMOLLM2_135M
    from wgraph.models import LlamaConfig

    dev = wg.default_device()
    print(f"{wg.__file__} on {dev.caps.adapter_name}", flush=True)
    cfg = LlamaConfig.from_dict(SMOLLM2_135M)
    rng = np.random.default_rng(0)
    for fmt in sys.argv[1:] or ["Q8_0", "Q4_0"]:
        kernels(dev, cfg, fmt, rng)
        if MODEL:
            model(dev, cfg, fmt)


if __name__ == "__main__":
    main()
