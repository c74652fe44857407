"""A Llama decode step over QuantizedWeights: a tiny random model quantized to Q8_0 (and to Q4_K with tied
embeddings, whose table is the lm_head too) gives the same greedy ids as the same weights dequantized to f32
through the f32 Llama, in as many dispatches (the norms, swiglu and residual adds fused into the quantized
GEMVs, RoPE and the KV append in the [q; k; v] GEMV's epilogue: 4 a layer besides the attention the plan table
gives the device, and 4 a token, dev.stats); weight_bytes_per_token counts the blocks a step reads."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.ggml_blocks import FORMATS
from wgraph.kernels.registry import registry
from wgraph.models import Llama, LlamaConfig
from wgraph.models.quantized import QuantizedLlama, checkpoint_formats, dequantize_checkpoint, quantize_checkpoint
from wgraph.models.random_checkpoint import random_weights, tiny_config

from decode_plan import step_dispatches, whole_cache_attention_variants
from kernel_support import cannot_run


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


def _gemv_class(dev, ggml_type: str) -> str:
    """The GEMV class one row of x plans on this device: r1, unless the device can run r1's subgroup GEMV but for
    its workgroup memory (the IQ formats' r1 GEMVs take 17 KB: a 16 KiB device with subgroups plans their r8
    GEMVs; one without subgroups, their r1 workgroup-memory twins, r1_wg, 9 KB)."""
    r1 = registry()[f"quant_gemv_r1_{ggml_type.lower()}"]
    fits = r1.workgroup_memory <= dev.caps.max_workgroup_storage
    return "quant_gemv_r1_" if fits or not dev.caps.has_subgroups else "quant_gemv_r8_"


def _rope_kv_gemv(dev, ggml_type: str) -> str:
    """The norm+qkv GEMV the plan table gives one row of x on this device: a CPU adapter's own class for Q8_0, Q4_0
    and Q4_1 (subgroups), subgroup sums, or the workgroup-memory twin (`_wg_`) where the device cannot run that (no
    subgroups; 16 KiB for the IQ formats' 17 KB)."""
    if dev.caps.is_cpu and dev.caps.has_subgroups and ggml_type in ("Q8_0", "Q4_0", "Q4_1"):
        return f"quant_gemv_rope_kv_r1_cpu_{ggml_type.lower()}_f32kv"
    sums = f"quant_gemv_rope_kv_r1_{ggml_type.lower()}_f32kv"
    return sums if cannot_run(dev, sums) is None else f"quant_gemv_rope_kv_r1_wg_{ggml_type.lower()}_f32kv"


@pytest.mark.parametrize("ggml_type, overrides", [
    ("Q8_0", dict(tie_word_embeddings=False)),
    ("Q5_0", dict(tie_word_embeddings=True)),  # llama.cpp's K-quant fallback for rows that are no 256-weight blocks
    ("Q5_1", dict(tie_word_embeddings=False)),
    ("Q4_K", dict(tie_word_embeddings=True, hidden_size=256, intermediate_size=512, head_dim=64)),
    ("Q3_K", dict(tie_word_embeddings=False, hidden_size=256, intermediate_size=512, head_dim=64)),
    ("IQ4_NL", dict(tie_word_embeddings=True)),
    ("IQ4_XS", dict(tie_word_embeddings=False, hidden_size=256, intermediate_size=512, head_dim=64)),
    ("IQ3_XXS", dict(tie_word_embeddings=True, hidden_size=256, intermediate_size=512, head_dim=64)),
    ("IQ3_S", dict(tie_word_embeddings=False, hidden_size=256, intermediate_size=512, head_dim=64)),
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
    assert all(r.variant.startswith(_gemv_class(dev, ggml_type)) for r in rows if r.op == "linear_q")
    qkv = [r.variant for r in rows if r.op == "linear_rope_kv_append_q"]
    assert qkv == [_rope_kv_gemv(dev, ggml_type)] * config.num_hidden_layers
    # a layer: norm+qkv GEMV with RoPE and the K/V append in its epilogue, o_proj+residual, norm+gate_up+swiglu,
    # down+residual and the attention the plan table gives this device (split-K's two passes on lavapipe, one on a
    # GPU over 48 rows); then embedding, norm+lm_head, argmax, decode_advance
    model.prefill(prompt)
    before = dev.stats.snapshot()
    model.run_steps(3, in_flight=1)
    assert dev.stats.since(before).dispatches == sum(step_dispatches(model, p) for p in range(4, 7))
    assert [r.variant for r in rows if r.op == "attention"] == whole_cache_attention_variants(model)
    assert rows[0].variant == f"quant_embedding_{ggml_type.lower()}"
    np.testing.assert_allclose(model.prefill(prompt).numpy(), reference.prefill(prompt).numpy(), rtol=1e-4, atol=1e-4)


# llama.cpp's Q4_K_M layout on a tiny model of 2 layers (its use_more_bits layers: i < 2 // 8, i >= 7 * 2 // 8,
# (i - 2 // 8) % 3 == 2: layer 1): the tied table (the output) Q6_K, v_proj and down_proj Q6_K in layer 1, every
# other matrix Q4_K
Q4_K_M_CFG = dict(tie_word_embeddings=True, hidden_size=256, intermediate_size=512, head_dim=64)


def k_m_type(name: str, base: str = "Q4_K") -> str:
    if name == "model.embed_tokens.weight":
        return "Q6_K"
    return "Q6_K" if name.startswith("model.layers.1.") and (".v_proj." in name or ".down_proj." in name) else base


LAYER_MATRICES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                  "mlp.up_proj", "mlp.down_proj")


def _llama_names(layers: int, hidden: int = 256) -> dict:
    """Zero matrices under a Llama's HF names, a tied table and the final norm."""
    matrices = {f"model.layers.{i}.{m}.weight": np.zeros((2, hidden)) for i in range(layers) for m in LAYER_MATRICES}
    return matrices | {"model.embed_tokens.weight": np.zeros((4, hidden)), "model.norm.weight": np.zeros(hidden)}


def _expect(weights: dict, output: str, v: dict, down: dict, o: str, base: str) -> dict:
    """{name: format}: the output's, v_proj's and down_proj's by layer (v, down), o_proj's, the base's elsewhere."""
    out = {}
    for name, a in weights.items():
        if np.ndim(a) != 2:
            continue
        layer = int(name.split(".")[2]) if name.startswith("model.layers.") else None
        out[name] = (output if name == "model.embed_tokens.weight" else v[layer] if ".v_proj." in name
                     else down[layer] if ".down_proj." in name else o if ".o_proj." in name else base)
    return out


def test_file_types_follow_llama_cpp():
    """quantize_checkpoint's file types pick llama.cpp's formats (its llama_tensor_get_type, written out here by
    hand for 16 layers, Llama-3.2-1B's count): Q4_K_M's use_more_bits layers are 0, 1, 4, 7, 10, 13, 14, 15; an
    untied model's lm_head is the output, its table the base format; a block format's name is that format for
    every matrix."""
    w = _llama_names(16)
    wide = {0, 1, 4, 7, 10, 13, 14, 15}
    q4_k_m = _expect(w, "Q6_K", {i: "Q6_K" if i in wide else "Q4_K" for i in range(16)},
                     {i: "Q6_K" if i in wide else "Q4_K" for i in range(16)}, "Q4_K", "Q4_K")
    assert checkpoint_formats(w, "Q4_K_M") == q4_k_m
    assert checkpoint_formats(w, "Q5_K_M") == {name: "Q5_K" if f == "Q4_K" else f for name, f in q4_k_m.items()}
    every = dict.fromkeys(range(16))
    assert checkpoint_formats(w, "Q3_K_S") == _expect(w, "Q6_K", dict.fromkeys(every, "Q3_K"),
                                                      dict.fromkeys(every, "Q3_K"), "Q3_K", "Q3_K")
    assert checkpoint_formats(w, "Q3_K_M") == _expect(w, "Q6_K", {i: "Q5_K" if i < 2 else "Q4_K" for i in range(16)},
                                                      {i: "Q5_K" if i < 1 else "Q4_K" for i in range(16)}, "Q4_K",
                                                      "Q3_K")
    assert checkpoint_formats(w, "Q3_K_L") == _expect(w, "Q6_K", dict.fromkeys(every, "Q5_K"),
                                                      dict.fromkeys(every, "Q5_K"), "Q5_K", "Q3_K")
    assert checkpoint_formats(w, "Q4_K_S") == _expect(w, "Q6_K", {i: "Q5_K" if i < 4 else "Q4_K" for i in range(16)},
                                                      {i: "Q5_K" if i < 2 else "Q4_K" for i in range(16)}, "Q4_K",
                                                      "Q4_K")
    assert set(checkpoint_formats(w, "Q5_K_S").values()) == {"Q6_K", "Q5_K"}
    # an lm_head of other values than the table (one equal to it is a tied model's copy: the table's format)
    untied = checkpoint_formats(dict(w, **{"lm_head.weight": np.ones((4, 256))}), "Q4_K_M")
    assert untied["lm_head.weight"] == "Q6_K" and untied["model.embed_tokens.weight"] == "Q4_K"
    for fmt in ("Q8_0", "Q2_K", "IQ4_XS"):   # block formats: every matrix
        assert set(checkpoint_formats(w, fmt).values()) == {fmt}
    with pytest.raises(wg.UnsupportedError, match="TQ1_0"):
        checkpoint_formats(w, "TQ1_0")


def test_file_types_fall_back_on_rows_of_partial_blocks():
    """Rows of 576 weights (SmolLM2-135M's hidden size, no whole 256-weight block) take llama.cpp's fallbacks:
    Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q3_K -> Q4_0, the output Q8_0; rows of 48 weights (no whole
    32-weight block either) stay float (left out)."""
    w = _llama_names(2, hidden=576)
    got = checkpoint_formats(w, "Q4_K_M")
    assert got["model.embed_tokens.weight"] == "Q8_0" and got["model.layers.1.self_attn.v_proj.weight"] == "Q8_0"
    assert got["model.layers.0.self_attn.q_proj.weight"] == "Q5_0"
    assert set(checkpoint_formats(w, "Q5_K_S").values()) == {"Q8_0", "Q5_1"}
    assert checkpoint_formats(w, "Q3_K_S")["model.layers.0.mlp.up_proj.weight"] == "Q4_0"
    assert checkpoint_formats(_llama_names(2, hidden=48), "Q4_K_M") == {}


@pytest.mark.parametrize("mixture, base", [("Q4_K_M", "Q4_K"), ("Q5_K_M", "Q5_K")])
def test_mixed_stacks_are_dequantized_and_decode_as_the_f32_model(dev, mixture, base):
    """A stack of tensors of different formats (a Q4_K_M layer's [q; k; v] with a Q6_K v_proj; a quantized
    gate_proj beside a float up_proj) is held in f32, dequantized on load; the rest keep their blocks (Q6_K's
    GEMV, embedding and fused QKV included): greedy ids equal the dequantized f32 model's, and a step reads
    the bytes counted here from the formats."""
    cfg = tiny_config(**Q4_K_M_CFG)
    config = LlamaConfig.from_dict(cfg)
    weights = random_weights(cfg, seed=3)
    weights["model.embed_tokens.weight"] *= 0.1
    quantized = quantize_checkpoint(weights, mixture)
    assert {name: w.ggml_type for name, w in quantized.items() if np.ndim(weights[name]) == 2} == {
        name: k_m_type(name, base) for name, w in weights.items() if np.ndim(w) == 2}
    model = QuantizedLlama.from_weights(config, quantized, dev, max_seq=40)
    assert model.block_formats == (base, "Q6_K")
    assert model.mixed_stacks == {"l1.w_qkv": (base, "Q6_K")}
    reference = Llama.from_weights(config, dequantize_checkpoint(quantized), dev, dtype="f32", max_seq=40)
    prompt = [3, 14, 15, 92]
    ids = model.generate(prompt, 12)
    assert len(ids) == 12 and ids == reference.generate(prompt, 12)
    np.testing.assert_allclose(model.prefill(prompt).numpy(), reference.prefill(prompt).numpy(), rtol=1e-4, atol=1e-4)
    qkv = [f"model.layers.1.self_attn.{p}_proj.weight" for p in "qkv"]
    want = sum(4 * w.size if name in qkv or np.ndim(w) == 1 else
               w.shape[0] * w.shape[1] // 256 * FORMATS[k_m_type(name, base)].block_bytes
               for name, w in weights.items())
    assert model.weight_bytes_per_token == want
    rows = model.program.rows
    assert [r.variant for r in rows if r.op == "linear_rope_kv_append_q"] == [_rope_kv_gemv(dev, base)]
    assert rows[0].variant == "quant_embedding_q6_k"
    assert {r.variant[-4:] for r in rows if r.op == "linear_q"} == {base.lower(), "q6_k"}

    floats = quantize_checkpoint(random_weights(tiny_config()), "Q8_0")
    up = "model.layers.0.mlp.up_proj.weight"
    mixed = QuantizedLlama.from_weights(LlamaConfig.from_dict(tiny_config()), dict(floats, **{up: floats[up].dequantize()}),
                                        dev, max_seq=16)
    assert mixed.mixed_stacks == {"l0.w_gate_up": ("Q8_0", "float")}


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


@pytest.mark.parametrize("name", ["model.norm.weight", "model.layers.1.post_attention_layernorm.weight"])
def test_a_quantized_vector_is_refused_by_name(dev, name):
    """A QuantizedWeight (a matrix) given for a norm's vector raised a bare ValueError ('not enough values to
    unpack') while the program's states were declared; it is a CheckpointError naming the tensor and both shapes,
    before any GPU work."""
    cfg = tiny_config()
    weights = quantize_checkpoint(random_weights(cfg), "Q8_0")
    weights[name] = wg.ggml_blocks.quantize(np.ones((1, 64), np.float32), "Q8_0")
    with pytest.raises(wg.CheckpointError, match=rf"tensor {name!r} is a Q8_0 QuantizedWeight of shape \[1, 64\]; "
                                                 r"the config needs a float array of shape \[64\]"):
        QuantizedLlama.from_weights(LlamaConfig.from_dict(cfg), weights, dev, max_seq=16)


def test_a_tied_models_lm_head_copy_quantizes_as_its_table(dev):
    """transformers' state_dict() of a tied model holds lm_head.weight beside the table (the same tensor), which
    Llama.from_weights takes. quantize_checkpoint(w, "Q4_K_M") took that copy for the output (Q6_K) and the table for
    an untied one's (Q4_K), so QuantizedLlama refused the copy ("not used ... taken only where it equals
    model.embed_tokens.weight"); now the table is the output (Q6_K, llama.cpp's tied output) and the copy its same
    blocks: the model's logits are the float64 forward's over the gguf-dequantized weights."""
    import gguf
    from llama_reference import forward, rel_err

    cfg = tiny_config(hidden_size=256, intermediate_size=256, head_dim=64, num_hidden_layers=1,
                      tie_word_embeddings=True)
    weights = random_weights(cfg, seed=11)
    weights["model.embed_tokens.weight"] *= 0.1
    weights["lm_head.weight"] = weights["model.embed_tokens.weight"].copy()
    formats = checkpoint_formats(weights, "Q4_K_M")
    assert formats["model.embed_tokens.weight"] == formats["lm_head.weight"] == "Q6_K"
    quantized = quantize_checkpoint(weights, "Q4_K_M")
    model = QuantizedLlama.from_weights(LlamaConfig.from_dict(cfg), quantized, dev, max_seq=16)
    assert model.block_formats == ("Q4_K", "Q6_K")
    deq = {name: gguf.quants.dequantize(w.raw().reshape(w.shape[0], -1), gguf.GGMLQuantizationType[w.ggml_type])
           if isinstance(w, wg.ggml_blocks.QuantizedWeight) else w for name, w in quantized.items()}
    ids = [3, 14, 15, 92]
    assert rel_err(model.prefill(ids, all_logits=True).numpy(), forward(cfg, deq, ids)) < 1e-5


def test_the_float_llama_names_a_quantized_weight(dev):
    """Llama.from_weights given QuantizedWeights (quantize_checkpoint's output, meant for QuantizedLlama) said
    "tensor 'model.embed_tokens.weight' has shape [], the config needs [100, 64]" (np.asarray of a QuantizedWeight
    is a 0-d object array); it names the tensor's format and shape and where blocks go."""
    cfg = tiny_config(num_hidden_layers=1)
    weights = quantize_checkpoint(random_weights(cfg), "Q8_0")
    with pytest.raises(wg.CheckpointError, match=r"tensor 'model.embed_tokens.weight' is a Q8_0 QuantizedWeight "
                                                 r"\[100, 64\]; Llama takes float arrays: QuantizedLlama.from_weights"):
        Llama.from_weights(LlamaConfig.from_dict(cfg), weights, dev, dtype="f32", max_seq=8)


def test_uploaded_blocks_are_refused_by_name_before_compiling(dev):
    """A QuantizedWeight whose blocks are already on the GPU (qw.upload(dev)) compiled the whole program, then
    raised dev.write's DtypeError naming the state ('l0.w_down'), not the tensor; it is a CheckpointError naming
    the tensor before any GPU work (QuantizedLlama uploads host blocks itself)."""
    cfg = tiny_config(num_hidden_layers=1)
    weights = quantize_checkpoint(random_weights(cfg), "Q8_0")
    name = "model.layers.0.mlp.down_proj.weight"
    weights[name] = weights[name].upload(dev)
    before = dev.stats.snapshot()
    with pytest.raises(wg.CheckpointError, match=rf"tensor {name!r} is a Q8_0 QuantizedWeight whose blocks are a "
                                                 r"Tensor, not host data"):
        QuantizedLlama.from_weights(LlamaConfig.from_dict(cfg), weights, dev, max_seq=8)
    assert dev.stats.since(before).dispatches == 0


def test_a_bf16_checkpoint_quantizes_from_its_values(dev):
    """A bf16 checkpoint's tensors are bit patterns (dtypes.BF16_BITS, as Checkpoint.get and Llama.from_weights take
    them); quantize_checkpoint(w, "Q8_0") quantized np.asarray(a, np.float32), the bits taken as numbers (1.0,
    0x3F80, became 16256.0): the model's logits were as far from the bf16 model's as they are large, silently. Now
    each matrix's blocks are the gguf package's Q8_0 of the bf16 values (bits << 16 as f32), and the model's
    logits are the float64 forward's over those blocks dequantized by gguf."""
    import gguf
    from llama_reference import forward, rel_err
    from wgraph.dtypes import to_bf16

    cfg = tiny_config(num_hidden_layers=1)
    bits = {name: to_bf16(a) for name, a in random_weights(cfg, seed=4).items()}
    quantized = quantize_checkpoint(bits, "Q8_0")
    q8 = gguf.GGMLQuantizationType.Q8_0
    values, deq = {}, {}
    for name, b in bits.items():
        values[name] = (b["bf16"].astype(np.uint32) << 16).view(np.float32)
        if b.ndim == 2:
            raw = gguf.quants.quantize(values[name], q8)
            assert np.array_equal(quantized[name].raw().reshape(raw.shape), raw), name
            deq[name] = gguf.quants.dequantize(raw, q8)
        else:
            assert quantized[name] is b   # a norm stays as it is given
            deq[name] = values[name]
    model = QuantizedLlama.from_weights(LlamaConfig.from_dict(cfg), quantized, dev, max_seq=8)
    ids = [1, 17, 42]
    assert rel_err(model.prefill(ids, all_logits=True).numpy(), forward(cfg, deq, ids)) < 1e-5
