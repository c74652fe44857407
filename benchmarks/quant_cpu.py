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
SMOLLM2 = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
               num_key_value_heads=3, head_dim=64, vocab_size=49152, rms_norm_eps=1e-5, rope_theta=100000.0,
               max_position_embeddings=2048, tie_word_embeddings=True, architectures=["LlamaForCausalLM"],
               model_type="llama")
# the decode step's GEMVs (out, in): the lm_head, gate+up, down, q+k+v, o
SHAPES = [(49152, 576), (3072, 576), (576, 1536), (960, 576), (576, 576)]


def best_of(fn) -> float:
    fn()  # the first call compiles
    best = float("inf")
    for _ in range(ROUNDS):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def kernels(dev, fmt: str, rng) -> None:
    import wgraph as wg
    from wgraph.ggml_blocks import quantize
    from wgraph.ops.quantized import plan_linear_q

    for n, k in SHAPES:
        qw = quantize((rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32), fmt)
        w, x = qw.upload(dev), dev.tensor(rng.standard_normal((ROWS, k)).astype(np.float32))

        def calls():
            for _ in range(CALLS):
                y = wg.ops.linear(x, w)
            y.numpy()

        variant = plan_linear_q(ROWS, n, k, fmt, caps=dev.caps).variant
        print(f"{fmt} [{n}, {k}] {ROWS} row(s)  {variant:28s} {best_of(calls) / CALLS * 1e3:8.2f} ms", flush=True)


def model(dev, fmt: str) -> None:
    from wgraph.bench.model import seeded_host_weights
    from wgraph.bench.quant import quantize_weights
    from wgraph.models import LlamaConfig
    from wgraph.models.quantized import QuantizedLlama

    cfg = LlamaConfig.from_dict(SMOLLM2)
    m = QuantizedLlama.from_weights(cfg, quantize_weights(seeded_host_weights(cfg), fmt, 1), dev, max_seq=64)
    tokens = 16
    t = best_of(lambda: m.generate([1, 2, 3], tokens))
    print(f"{fmt} model: {tokens} tokens after a 3-token prompt in {t:.3f} s, {t / tokens * 1e3:.1f} ms a token",
          flush=True)


def main() -> None:
    import wgraph as wg

    dev = wg.default_device()
    print(f"{wg.__file__} on {dev.caps.adapter_name}", flush=True)
    rng = np.random.default_rng(0)
    for fmt in sys.argv[1:] or ["Q8_0", "Q4_0"]:
        kernels(dev, fmt, rng)
        if MODEL:
            model(dev, fmt)


if __name__ == "__main__":
    main()
