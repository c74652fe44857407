"""A Llama decode step over QuantizedWeights: a tiny random model quantized to Q8_0 (and to Q4_K with tied
embeddings, whose table is the lm_head too) gives the same greedy ids as the same weights dequantized to f32
through the f32 Llama, in as many dispatches (the norms, swiglu and residual adds fused into the quantized
GEMVs, RoPE and the KV append in the [q; k; v] GEMV's epilogue: 6 a layer and 4 a token, dev.stats);
weight_bytes_per_token counts the blocks a step reads."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.ggml_blocks import FORMATS
from wgraph.models import Llama, LlamaConfig
from wgraph.models.quantized import QuantizedLlama, dequantize_checkpoint, quantize_checkpoint
from wgraph.models.random_checkpoint import random_weights, tiny_config


def bytes_per_token(cfg: dict, weights: dict, ggml_type: str) -> int:
    """Every matrix's raw blocks (rows x blocks per row x block bytes), the f32 norms, and one table row when
    the embedding is not the lm_head."""
    fmt = FORMATS[ggml_type]
    total = 0
    for name, w in weights.items():
        if np.ndim(w) == 1:
            total += 4 * w.size
            continue
        n, k = np.shape(w)
        row = k // fmt.block_weights * fmt.block_bytes
        total += row if name == "model.embed_tokens.weight" and not cfg["tie_word_embeddings"] else n * row
    return total


@pytest.mark.parametrize("ggml_type, overrides", [
    ("Q8_0", dict(tie_word_embeddings=False)),
    ("Q4_K", dict(tie_word_embeddings=True, hidden_size=256, intermediate_size=512, head_dim=64)),
])
def test_greedy_ids_equal_the_dequantized_f32_model(dev, ggml_type, overrides):
    cfg = tiny_config(**overrides)
    config = LlamaConfig.from_dict(cfg)
    weights = random_weights(cfg, seed=5)
    if cfg["tie_word_embeddings"]:  # a smaller table: else a tied random model repeats the last prompt token
        weights["model.embed_tokens.weight"] *= 0.1
    quantized = quantize_checkpoint(weights, ggml_type)
    model = QuantizedLlama.from_weights(config, quantized, dev, max_seq=48)
    reference = Llama.from_weights(config, dequantize_checkpoint(quantized), dev, dtype="f32", max_seq=48)
    prompt = [1, 17, 42, 9]
    ids = model.generate(prompt, 16)
    assert len(ids) == 16 and ids == reference.generate(prompt, 16)
    assert model.weight_bytes_per_token == bytes_per_token(cfg, weights, ggml_type)
    rows = model.program.rows
    quantized_ops = {"linear_q": "linear", "embedding_q": "embedding",
                     "linear_rope_kv_append_q": "linear_rope_kv_append"}
    assert [quantized_ops.get(r.op, r.op) for r in rows] == [r.op for r in reference.program.rows]
    assert all(r.variant.startswith("quant_gemv_r1_") for r in rows if r.op == "linear_q")
    qkv = [r.variant for r in rows if r.op == "linear_rope_kv_append_q"]
    assert qkv == [f"quant_gemv_rope_kv_r1_{ggml_type.lower()}_f32kv"] * config.num_hidden_layers
    # a layer: norm+qkv GEMV with RoPE and the K/V append in its epilogue, attention's chunks and combine,
    # o_proj+residual, norm+gate_up+swiglu, down+residual; then embedding, norm+lm_head, argmax, decode_advance
    model.prefill(prompt)
    before = dev.stats.snapshot()
    model.run_steps(3, in_flight=1)
    assert dev.stats.since(before).dispatches == 3 * (6 * config.num_hidden_layers + 4)
    assert rows[0].variant == f"quant_embedding_{ggml_type.lower()}"
    np.testing.assert_allclose(model.prefill(prompt).numpy(), reference.prefill(prompt).numpy(), rtol=1e-4, atol=1e-4)


def test_refuses_mixed_stacks(dev):
    cfg = tiny_config()
    config = LlamaConfig.from_dict(cfg)
    weights = quantize_checkpoint(random_weights(cfg), "Q8_0")
    mixed = dict(weights, **{"model.layers.0.mlp.up_proj.weight": weights["model.layers.0.mlp.up_proj.weight"].dequantize()})
    with pytest.raises(wg.CheckpointError, match="stacked into one matrix and must share a format"):
        QuantizedLlama.from_weights(config, mixed, dev, max_seq=16)


def test_samples_on_the_greedy_programs_block_states(dev):
    """Sampling compiles its program on the greedy one's weight states (blocks included, nothing copied): the
    same ids as the same weights dequantized to f32 through Llama with the same seed, the same ids again for the
    same seed, and greedy afterwards as before."""
    cfg = tiny_config()
    config = LlamaConfig.from_dict(cfg)
    weights = quantize_checkpoint(random_weights(cfg), "Q8_0")
    model = QuantizedLlama.from_weights(config, weights, dev, max_seq=24)
    twin = Llama.from_weights(config, dequantize_checkpoint(weights), dev, dtype="f32", max_seq=24)
    greedy = model.generate([1, 2], 6)
    sampled = model.generate([1, 2], 6, temperature=0.9, seed=7)
    assert sampled == model.generate([1, 2], 6, temperature=0.9, seed=7)
    assert sampled == twin.generate([1, 2], 6, temperature=0.9, seed=7)
    assert model.generate([1, 2], 6) == greedy == twin.generate([1, 2], 6)
    blocks = [n for n, s in model._states.items() if s.ggml_type is not None]
    assert blocks and all(model.program.state(n).buffer is not None for n in blocks)
