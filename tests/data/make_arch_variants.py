"""Make the tiny checkpoints of tests/data/arch_variants/ with Hugging Face transformers itself (run once; the tests
read the files and never import transformers or torch):

    python tests/data/make_arch_variants.py      # needs torch and transformers (5.25 made the committed files)

The architecture features the cases of make_arch_checkpoints.py (tests/data/arch/) leave out, each visible in the
golden's 24 positions: linear RoPE (on the fused and the unfused q/k path), Llama 3 RoPE off Llama, a head_dim
unlike hidden_size / num_attention_heads on every architecture, multi-query (1 KV head) and multi-head (as many)
attention, layer_types that say other than max_window_layers or Gemma 2's alternation would, a window wider than the
prompt (it first binds in the decode steps), Qwen3's attention biases (o_proj's too) and sliding windows, Gemma 2's
attention biases, untied lm_head, exact GELU and null final softcap, Llama with exact GELU, float16 storage.

Files per case as make_arch_checkpoints.py writes them (model.safetensors, config.json, config_v4.json, golden.npz;
its helpers make the weights and goldens), except that config_v4.json keeps layer_types where a case gives its own
(transformers 4.53 and later wrote it: without it the layers' kinds would differ) and writes the old `type` key of
rope_scaling. The script checks that transformers reads both config files to the same logits, bit for bit.

This script never imports wgraph (make_arch_checkpoints.py's check_defaults, which does, is not called)."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_arch_checkpoints import build_case, v4_config  # noqa: E402

ROOT = Path(__file__).resolve().parent / "arch_variants"

# name -> (config class, model class, storage dtype, config arguments, layer_types kept in config_v4.json)
CASES = {
    # linear RoPE (fused q/k/v path), head_dim 16 of hidden 32 / 4 heads, one KV head, exact GELU, untied
    "llama_linear_mqa": ("LlamaConfig", "LlamaForCausalLM", torch.bfloat16, dict(
        head_dim=16, num_key_value_heads=1, hidden_act="gelu", tie_word_embeddings=False,
        rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}), False),
    # layer_types against max_window_layers (which would make [full, full, sliding]), head_dim 12, as many KV
    # heads as heads, Llama 3 RoPE, untied
    "qwen2_layer_types": ("Qwen2Config", "Qwen2ForCausalLM", torch.bfloat16, dict(
        num_hidden_layers=3, head_dim=12, num_key_value_heads=4, use_sliding_window=True, sliding_window=3,
        max_window_layers=2, layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 16}), True),
    # Qwen3 with attention_bias (q, k, v and o biases) and windows of 5 keys from max_window_layers=1 (unfused q/k
    # path), linear RoPE, head_dim 12, tied
    "qwen3_bias_window": ("Qwen3Config", "Qwen3ForCausalLM", torch.bfloat16, dict(
        num_hidden_layers=3, head_dim=12, attention_bias=True, use_sliding_window=True, sliding_window=5,
        max_window_layers=1, tie_word_embeddings=True,
        rope_parameters={"rope_type": "linear", "rope_theta": 1000000.0, "factor": 2.0}), False),
    # a window of 11 keys: wider than the 8-id prompt, it binds only from the 4th decode step on; head_dim 16,
    # MHA, Llama 3 RoPE, tied, float16 storage
    "mistral_long_window": ("MistralConfig", "MistralForCausalLM", torch.float16, dict(
        head_dim=16, num_key_value_heads=4, sliding_window=11, tie_word_embeddings=True,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 16}), False),
    # Gemma 2: layer_types other than the alternation, attention biases, exact GELU, untied lm_head, no final
    # softcap, one KV head, head_dim 12, query_pre_attn_scalar 10, linear RoPE
    "gemma2_variant": ("Gemma2Config", "Gemma2ForCausalLM", torch.bfloat16, dict(
        num_hidden_layers=3, head_dim=12, num_key_value_heads=1, query_pre_attn_scalar=10, attention_bias=True,
        hidden_activation="gelu", tie_word_embeddings=False, final_logit_softcapping=None,
        attn_logit_softcapping=4.0, sliding_window=5, rms_norm_eps=1e-5,
        layer_types=["full_attention", "sliding_attention", "sliding_attention"],
        rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}), True),
}


# per case: config changes that transformers must compute other logits from (max |difference| > VISIBLE over the
# golden's 23 positions), so that a wgraph that ignored the feature could not match the golden
VISIBLE = 5e-4  # 5 x the tests' tolerance (exact against tanh GELU: 8.5e-4)
ABLATIONS = {
    "llama_linear_mqa": [dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
                         dict(hidden_act="gelu_pytorch_tanh")],
    "qwen2_layer_types": [dict(layer_types=None),
                          dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0})],
    "qwen3_bias_window": [dict(use_sliding_window=False, layer_types=None), dict(layer_types=None, max_window_layers=2),
                          dict(rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
                          dict(attention_bias=False)],
    "mistral_long_window": [dict(sliding_window=None),
                            dict(rope_parameters={"rope_type": "default", "rope_theta": 500000.0})],
    "gemma2_variant": [dict(layer_types=None), dict(hidden_activation="gelu_pytorch_tanh"),
                       dict(attn_logit_softcapping=None), dict(final_logit_softcapping=3.0),
                       dict(attention_bias=False), dict(query_pre_attn_scalar=12),
                       dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0})],
}


def logits_with(case: str, config: dict, ids: list[int]) -> np.ndarray:
    """transformers' float32 logits of `ids` from case's weights read with `config`."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(ROOT / case / "model.safetensors", tmp)
        (Path(tmp) / "config.json").write_text(json.dumps(config))
        model = getattr(transformers, CASES[case][1]).from_pretrained(tmp, dtype=torch.float32,
                                                                      attn_implementation="eager").eval()
        with torch.no_grad():
            return model(torch.tensor([ids])).logits[0].numpy()


def check_visible(case: str, gold: dict) -> None:
    v5 = json.loads((ROOT / case / "config.json").read_text())
    ids = gold["prompt"].tolist() + gold["greedy"].tolist()[:-1]
    assert np.array_equal(logits_with(case, v5, ids), gold["logits"]), case
    for change in ABLATIONS[case]:
        d = dict(v5, **change)
        if change.get("layer_types", 0) is None:
            del d["layer_types"]  # derived again from the other keys
        diff = float(np.abs(logits_with(case, d, ids) - gold["logits"]).max())
        print(f"  {case} with {change}: max |logit difference| {diff:.3g}", file=sys.stderr)
        assert diff > VISIBLE, (case, change, diff)


def variant_v4(v5: dict, keep_layer_types: bool) -> dict:
    """make_arch_checkpoints.v4_config, with layer_types kept where asked and the RoPE object's type under the old
    `type` key."""
    d = v4_config(v5)
    if keep_layer_types:
        d["layer_types"] = v5["layer_types"]
    if d["rope_scaling"] is not None:
        rope = dict(d["rope_scaling"])
        rope["type"] = rope.pop("rope_type")
        d["rope_scaling"] = rope
    return dict(sorted(d.items()))


def make(name: str, seed: int) -> None:
    config_name, model_name, storage, args, keep_layer_types = CASES[name]
    out = ROOT / name
    v5, gold = build_case(name, config_name, model_name, storage, args, seed, out,
                          lambda v5: variant_v4(v5, keep_layer_types))
    for key, want in args.items():  # transformers kept what the case asked for
        assert v5[key] == want, (name, key, v5[key], want)
    check_visible(name, gold)
    sizes = {p.name: p.stat().st_size for p in out.iterdir()}
    assert max(sizes.values()) < 200_000, sizes
    print(f"{name}: greedy {gold['greedy'].tolist()}, {sum(sizes.values())} bytes", file=sys.stderr)


if __name__ == "__main__":
    print(f"transformers {transformers.__version__}, torch {torch.__version__}", file=sys.stderr)
    for i, case in enumerate(CASES):
        make(case, seed=200 + i)
