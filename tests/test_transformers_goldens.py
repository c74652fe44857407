"""Tiny random checkpoints saved by Hugging Face transformers itself (tests/data/arch/, made once by
tests/data/make_arch_checkpoints.py), in both config formats: transformers 5's config.json (RoPE settings in
`rope_parameters`) and the transformers 4 form (config_v4.json: top-level `rope_theta`/`rope_scaling`).
wgraph's prefill logits must be within 1e-4 of transformers' float32 logits and its 16 greedy ids equal."""

import json

import numpy as np
import pytest

from wgraph.errors import CheckpointError
from wgraph.models import Llama, LlamaConfig
from wgraph.models.llama import linear_weight_storage

from transformers_data import ARCH as DATA, FORMATS, checkpoint, golden

ATOL = 1e-4
CASES = ("llama", "llama_bias", "qwen2", "qwen3", "mistral", "gemma2")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("case", CASES)
def test_matches_transformers(case, fmt, tmp_path, dev):
    """Prefill logits of the prompt and the 16 greedy ids, then each decode step's logits (the program's
    output for the token it consumed) against transformers' logits at that position."""
    g = golden(DATA / case)
    prompt, greedy, want = g["prompt"].tolist(), g["greedy"].tolist(), g["logits"]
    model = Llama.from_pretrained(checkpoint(DATA / case, tmp_path, fmt), dev, dtype="f32", max_seq=32)
    got = model.prefill(prompt, all_logits=True).numpy()
    np.testing.assert_allclose(got, want[:len(prompt)], rtol=0, atol=ATOL)
    assert model.generate(prompt, len(greedy)) == greedy
    model.prefill(prompt)
    for i in range(len(greedy) - 1):  # step i consumes greedy[i], at position len(prompt) + i
        np.testing.assert_allclose(model.step().numpy()[0], want[len(prompt) + i], rtol=0, atol=ATOL,
                                   err_msg=f"step {i}")


BF16_CASES = [c for c in CASES if json.loads((DATA / c / "config.json").read_text())["dtype"] == "bfloat16"]


@pytest.mark.parametrize("case", BF16_CASES)
def test_bf16_checkpoints_load_as_bf16(case, tmp_path, dev):
    """dtype="bf16" keeps a bf16 checkpoint's values exactly (activations, norms and KV caches are f32), so it
    computes what transformers computes in float32 from the same file."""
    g = golden(DATA / case)
    prompt, greedy, want = g["prompt"].tolist(), g["greedy"].tolist(), g["logits"]
    model = Llama.from_pretrained(checkpoint(DATA / case, tmp_path, "v5"), dev, dtype="bf16", max_seq=32)
    st = model.program.state
    tied = model.config.tie_word_embeddings
    matrices = linear_weight_storage("bf16")  # bf16 once `linear` has a bf16 kernel, else f32 holding bf16 values
    assert st("embed").dtype == (matrices if tied else "bf16")
    assert st("l0.wo").dtype == st("l0.w_down").dtype == matrices
    assert st("l0.attn_norm").dtype == st("l0.k_cache").dtype == "f32"
    np.testing.assert_allclose(model.prefill(prompt, all_logits=True).numpy(), want[:len(prompt)], rtol=0, atol=ATOL)
    assert model.generate(prompt, len(greedy)) == greedy
    # sampling compiles the other decode program and moves the weights (bf16 ones too) into it on the GPU
    model.generate(prompt, 2, temperature=1.0, seed=1)
    assert model.generate(prompt, len(greedy)) == greedy


def test_the_two_formats_read_to_one_config():
    v5 = json.loads((DATA / "llama" / "config.json").read_text())
    v4 = json.loads((DATA / "llama" / "config_v4.json").read_text())
    assert "rope_theta" not in v5 and "rope_scaling" not in v5  # what transformers 5 writes
    a, b = LlamaConfig.from_dict(v5), LlamaConfig.from_dict(v4)
    assert a == b and a.rope_theta == 500000.0 and a.rope_scaling.factor == 8.0


LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}


@pytest.mark.parametrize("change,match", [
    (dict(rope_theta=10000.0), "RoPE base is given twice"),
    (dict(rope_scaling=dict(LLAMA3, factor=4.0)), "rope_parameters .* and rope_scaling .* disagree"),
    (dict(rope_scaling={"type": "default"}), "rope_parameters .* and rope_scaling .* disagree"),
    (dict(rope_scaling=None, rope_theta=500000.0), None),  # both formats, agreeing: read as one
    (dict(rope_scaling={"type": "llama3", **{k: v for k, v in LLAMA3.items() if k != "rope_type"}}), None),
])
def test_both_formats_that_disagree_are_refused(change, match):
    base = json.loads((DATA / "llama" / "config.json").read_text())
    d = dict(base, **change)
    if match is None:
        assert LlamaConfig.from_dict(d) == LlamaConfig.from_dict(base)
    else:
        with pytest.raises(CheckpointError, match=match):
            LlamaConfig.from_dict(d)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("case", CASES)
def test_partial_rotary_factor_is_refused(case, fmt):
    """transformers 5.25 reads partial_rotary_factor < 1 of these architectures to a model that rotates every dim
    of the head (default RoPE: the factor ignored; make_arch_checkpoints.py checks it, logits bit for bit) or
    fails (linear, llama3); wgraph rotated part of the head, other logits (1.1 x max |logit| apart on a tiny
    Llama). Refused, in the RoPE object and at the top level alike."""
    d = json.loads((DATA / case / FORMATS[fmt]).read_text())
    rope = "rope_parameters" if fmt == "v5" else "rope_scaling"
    variants = [dict(d, partial_rotary_factor=0.5)]
    if d.get(rope) is not None:
        variants.append(dict(d, **{rope: dict(d[rope], partial_rotary_factor=0.5)}))
    for v in variants:
        with pytest.raises(CheckpointError, match=r"partial_rotary_factor=0\.5 \(RoPE on part of each head\) is "
                                                  r"refused: transformers 5\.25"):
            LlamaConfig.from_dict(v)
    assert LlamaConfig.from_dict(dict(d, partial_rotary_factor=1.0)) == LlamaConfig.from_dict(d)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_tied_config_with_a_different_lm_head_is_refused(fmt, tmp_path, dev):
    """tie_word_embeddings=true over a file that holds its own lm_head.weight, different from the embedding:
    transformers 5.25 does not tie them (its logits come from lm_head.weight: make_arch_checkpoints.py checks it,
    bit for bit), wgraph took the embedding as the lm_head (the Llama case so configured: prefill logits
    0.97 x max |logit| apart, all 16 greedy ids different). Refused before the model allocates; an lm_head.weight
    equal to the embedding (torch .bin conversions write both) is accepted."""
    from safetensors.numpy import load_file, save_file

    path = checkpoint(DATA / "llama", tmp_path, fmt)
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(dict(cfg, tie_word_embeddings=True)))
    with pytest.raises(CheckpointError, match=r"tie_word_embeddings=true, but 'lm_head\.weight' in model\.safetensors "
                                              r"differs from 'model\.embed_tokens\.weight': transformers 5\.25"):
        Llama.from_pretrained(path, dev, dtype="f32", max_seq=32)
    w = load_file(path / "model.safetensors")
    save_file(dict(w, **{"lm_head.weight": w["model.embed_tokens.weight"]}), path / "model.safetensors")
    Llama.from_pretrained(path, dev, dtype="f32", max_seq=32)
