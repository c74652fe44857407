"""The architecture features tests/data/arch/ leaves out, on tiny random checkpoints saved by Hugging Face
transformers itself (tests/data/arch_variants/, made once by tests/data/make_arch_variants.py, which also checks
that transformers' logits change by more than 5 x the tolerance without each feature): linear RoPE on the fused
and the unfused q/k path, Llama 3 RoPE on Qwen2 and Mistral, head_dim unlike hidden_size / num_attention_heads,
one KV head and as many as heads, layer_types other than max_window_layers or Gemma 2's alternation would give, a
window wider than the prompt (binding from the 4th decode step), Qwen3's attention biases (o_proj's too) and
windows, Gemma 2's attention biases, exact GELU, untied lm_head and null final softcap, float16 storage. In both
config formats, wgraph's prefill logits are within 1e-4 of transformers' float32 logits, its 16 greedy ids equal,
and each decode step's logits within 1e-4."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from wgraph.models import Checkpoint, Llama, LlamaConfig
from wgraph.models.batched import BatchedDecoder
from wgraph.models.llama import fused_qkv, weight_shapes

from transformers_data import FORMATS, checkpoint, golden

DATA = Path(__file__).parent / "data" / "arch_variants"
ATOL = 1e-4
CASES = ("llama_linear_mqa", "qwen2_layer_types", "qwen3_bias_window", "mistral_long_window", "gemma2_variant")

# What make_arch_variants.py asked transformers for, as DecoderConfig fields (written from the script's arguments
# and transformers' modelling code, not from wgraph's reader)
EXPECTED = {
    "llama_linear_mqa": dict(model_type="llama", head_dim=16, num_key_value_heads=1, activation="gelu",
                             tie_word_embeddings=False, rope_theta=10000.0, layer_windows=()),
    "qwen2_layer_types": dict(model_type="qwen2", num_hidden_layers=3, head_dim=12, num_key_value_heads=4,
                              qkv_bias=True, o_bias=False, layer_windows=(3, 0, 3), tie_word_embeddings=False,
                              rope_theta=10000.0),
    "qwen3_bias_window": dict(model_type="qwen3", num_hidden_layers=3, head_dim=12, num_key_value_heads=2,
                              qk_norm=True, qkv_bias=True, o_bias=True, layer_windows=(0, 5, 5),
                              tie_word_embeddings=True, rope_theta=1e6),
    "mistral_long_window": dict(model_type="mistral", head_dim=16, num_key_value_heads=4, layer_windows=(11, 11),
                                tie_word_embeddings=True, rope_theta=500000.0),
    "gemma2_variant": dict(model_type="gemma2", num_hidden_layers=3, head_dim=12, num_key_value_heads=1,
                           qkv_bias=True, o_bias=True, activation="gelu", norm_offset=1.0, sandwich_norms=True,
                           embed_scale=math.sqrt(32.0), query_pre_attn_scalar=10.0, attn_softcap=4.0,
                           final_softcap=0.0, layer_windows=(0, 5, 5), tie_word_embeddings=False, rms_norm_eps=1e-5,
                           rope_theta=10000.0),
}
SCALING = {"llama_linear_mqa": ("linear", 4.0), "qwen2_layer_types": ("llama3", 4.0),
           "qwen3_bias_window": ("linear", 2.0), "mistral_long_window": ("llama3", 8.0),
           "gemma2_variant": ("linear", 2.0)}


@pytest.mark.parametrize("case", CASES)
def test_configs_read_as_transformers_built_them(case):
    v5 = LlamaConfig.from_dict(json.loads((DATA / case / "config.json").read_text()))
    v4 = LlamaConfig.from_dict(json.loads((DATA / case / "config_v4.json").read_text()))
    assert v5 == v4
    for field, want in EXPECTED[case].items():
        got = getattr(v5, field)
        assert got == pytest.approx(want, rel=1e-7) if isinstance(want, float) else got == want, (field, got, want)
    kind, factor = SCALING[case]
    assert type(v5.rope_scaling).__name__ == {"linear": "LinearRopeScaling", "llama3": "RopeScaling"}[kind]
    assert v5.rope_scaling.factor == factor
    assert v5.head_dim * v5.num_attention_heads != v5.hidden_size  # head_dim is not hidden / heads


@pytest.mark.parametrize("case", CASES)
def test_tensor_names_and_shapes_are_transformers(case):
    """Every tensor transformers saved is one the decoder reads, with its shape (o_proj biases of Qwen3 and Gemma 2,
    lm_head beside Gemma 2's embedding, MQA's k/v rows)."""
    root = DATA / case
    ckpt = Checkpoint(root)
    saved = {name: tuple(ckpt._files[path].get_slice(name).get_shape()) for name, path in ckpt.where.items()}
    assert weight_shapes(LlamaConfig.from_dict(json.loads((root / "config.json").read_text()))) == saved


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("case", CASES)
def test_matches_transformers(case, fmt, tmp_path, dev):
    g = golden(DATA / case)
    prompt, greedy, want = g["prompt"].tolist(), g["greedy"].tolist(), g["logits"]
    model = Llama.from_pretrained(checkpoint(DATA / case, tmp_path, fmt), dev, dtype="f32", max_seq=32)
    np.testing.assert_allclose(model.prefill(prompt, all_logits=True).numpy(), want[:len(prompt)], rtol=0, atol=ATOL)
    assert model.generate(prompt, len(greedy)) == greedy
    model.prefill(prompt)
    for i in range(len(greedy) - 1):  # step i consumes greedy[i], at position len(prompt) + i
        np.testing.assert_allclose(model.step().numpy()[0], want[len(prompt) + i], rtol=0, atol=ATOL,
                                   err_msg=f"step {i}")


@pytest.mark.parametrize("case", [c for c in CASES
                                  if json.loads((DATA / c / "config.json").read_text())["dtype"] == "bfloat16"])
def test_bf16_model_matches_transformers(case, tmp_path, dev):
    """dtype="bf16" keeps a bf16 checkpoint's values exactly: transformers' float32 logits of the same file."""
    g = golden(DATA / case)
    prompt, greedy, want = g["prompt"].tolist(), g["greedy"].tolist(), g["logits"]
    model = Llama.from_pretrained(checkpoint(DATA / case, tmp_path, "v5"), dev, dtype="bf16", max_seq=32)
    np.testing.assert_allclose(model.prefill(prompt, all_logits=True).numpy(), want[:len(prompt)], rtol=0, atol=ATOL)
    assert model.generate(prompt, len(greedy)) == greedy


@pytest.mark.parametrize("case", [c for c in CASES if c != "qwen3_bias_window"])
def test_batched_decoder_matches_transformers(case, tmp_path, dev):
    """The batched step (its own RoPE / K/V append and attention kernels) on these heads, windows and RoPE tables:
    the golden prompt's ids in a batch with two other prompts are transformers' greedy ids; the others decode as
    they do alone."""
    g = golden(DATA / case)
    prompt, greedy = g["prompt"].tolist(), g["greedy"].tolist()
    model = Llama.from_pretrained(checkpoint(DATA / case, tmp_path, "v5"), dev, dtype="f32", max_seq=32)
    assert fused_qkv(model.config)
    others = [prompt[3:4], prompt[::-1][:6]]
    got = BatchedDecoder(model, 3).generate([others[0], prompt, others[1]], len(greedy))
    assert got[1] == greedy
    assert [got[0], got[2]] == [model.generate(p, len(greedy)) for p in others]
