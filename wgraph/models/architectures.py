"""The decoder architectures wgraph loads, as data: for each Hugging Face `model_type`, the causal-LM class
that `architectures` names, the config keys transformers' model of that type reads (beyond the common ones of
`COMMON_KEYS`) with the defaults transformers 5.25's config class gives a key a config.json omits, and the
fixed traits of the architecture (biases that are always there, per-head q/k norms, Gemma's norms and scales).
tests/data/make_arch_checkpoints.py checks the defaults against transformers' config classes."""

from __future__ import annotations

import attrs

# Keys every architecture here reads, with transformers' behaviour when omitted noted where it varies:
# head_dim (absent: hidden_size // num_attention_heads, unless the architecture's default says otherwise),
# num_key_value_heads (absent or null: the architecture's default), the RoPE keys (models/rope.py).
COMMON_KEYS = ("model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
               "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps",
               "tie_word_embeddings", "rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor")

# config.json activation names (transformers' ACT2FN) -> the gate activation wgraph computes
ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh",
               "gelu_new": "gelu_tanh"}


@attrs.frozen
class Architecture:
    """One model_type. `keys`: the config keys its transformers model reads beyond COMMON_KEYS; `defaults`:
    transformers' value for a key config.json omits (None: computed, e.g. head_dim from the other sizes)."""

    model_type: str
    causal_lm: str                    # the class name config.json's `architectures` holds
    keys: tuple[str, ...]
    defaults: dict
    activation_key: str = "hidden_act"
    qkv_bias: bool | None = False     # q/k/v projections carry biases: always (True), never, or per
                                      # `attention_bias` (None)
    qk_norm: bool = False             # RMSNorm over each head of q and k before RoPE (Qwen3)
    sliding_layers: str | None = None  # which layers `sliding_window` applies to when layer_types is absent:
                                      # "all" (Mistral), "from_max_window_layers" (Qwen2/3, with
                                      # use_sliding_window), "alternating" (Gemma 2: layers 0, 2, ...)
    no_null: tuple[str, ...] = ()     # keys whose null transformers' model computes with and fails on (its
                                      # attention sizes from None): refused rather than read as absent
    gemma_norms: bool = False         # (1 + w) norms, norms after attention and the MLP too, sqrt(hidden) embedding
                                      # scale, query_pre_attn_scalar, logit softcaps (Gemma 2)


def _defaults(**kw) -> dict:
    base = dict(num_key_value_heads=None, head_dim=None, rms_norm_eps=1e-6, tie_word_embeddings=False)
    base.update(kw)
    return base


ARCHITECTURES = {a.model_type: a for a in (
    Architecture("llama", "LlamaForCausalLM", ("hidden_act", "attention_bias", "mlp_bias"),
                 _defaults(max_position_embeddings=2048, hidden_act="silu", attention_bias=False, mlp_bias=False),
                 qkv_bias=None),
    Architecture("qwen2", "Qwen2ForCausalLM",
                 ("hidden_act", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types"),
                 _defaults(num_key_value_heads=32, max_position_embeddings=32768, hidden_act="silu",
                           use_sliding_window=False, sliding_window=4096, max_window_layers=28, layer_types=None),
                 qkv_bias=True, sliding_layers="from_max_window_layers", no_null=("head_dim",)),
    Architecture("qwen3", "Qwen3ForCausalLM",
                 ("hidden_act", "attention_bias", "use_sliding_window", "sliding_window", "max_window_layers",
                  "layer_types"),
                 _defaults(num_key_value_heads=32, head_dim=128, max_position_embeddings=32768, hidden_act="silu",
                           attention_bias=False, use_sliding_window=False, sliding_window=4096,
                           max_window_layers=28, layer_types=None),
                 qkv_bias=None, qk_norm=True, sliding_layers="from_max_window_layers", no_null=("head_dim",)),
    Architecture("mistral", "MistralForCausalLM", ("hidden_act", "sliding_window"),
                 _defaults(num_key_value_heads=8, max_position_embeddings=131072, hidden_act="silu",
                           sliding_window=4096),
                 sliding_layers="all", no_null=("num_key_value_heads",)),
    Architecture("gemma2", "Gemma2ForCausalLM",
                 ("hidden_activation", "hidden_act", "attention_bias", "query_pre_attn_scalar", "sliding_window",
                  "layer_types", "final_logit_softcapping", "attn_logit_softcapping", "use_bidirectional_attention",
                  "sliding_window_size"),
                 _defaults(num_key_value_heads=4, head_dim=256, max_position_embeddings=8192, tie_word_embeddings=True,
                           hidden_activation="gelu_pytorch_tanh", hidden_act=None, attention_bias=False,
                           query_pre_attn_scalar=256, sliding_window=4096, layer_types=None,
                           final_logit_softcapping=30.0, attn_logit_softcapping=50.0,
                           use_bidirectional_attention=None),
                 activation_key="hidden_activation", qkv_bias=None, gemma_norms=True, sliding_layers="alternating",
                 no_null=("head_dim", "num_key_value_heads")),
)}

BY_CLASS = {a.causal_lm: a for a in ARCHITECTURES.values()}
