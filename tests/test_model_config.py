"""config.json reading that cannot be silently wrong: the configs transformers wrote for each architecture in
both formats read to the expected DecoderConfig; every bad value of a key that changes the math, and every
key wgraph does not know, is refused with a CheckpointError naming it (no GPU work)."""

import json
import math
import re
from pathlib import Path

import attrs
import numpy as np
import pytest

from wgraph.errors import CheckpointError
from wgraph.models import DecoderConfig
from wgraph.models.config_keys import HARMLESS, HARMLESS_AT_DEFAULT
from wgraph.models.rope import LinearRopeScaling, RopeScaling

DATA = Path(__file__).parent / "data" / "arch"
CASES = ("llama", "llama_bias", "qwen2", "qwen3", "mistral", "gemma2")


def hf_config(case: str, fmt: str = "v5") -> dict:
    return json.loads((DATA / case / ("config.json" if fmt == "v5" else "config_v4.json")).read_text())


# What tests/data/make_arch_checkpoints.py asked transformers for, as DecoderConfig fields (written here from the
# script's arguments and transformers' modelling code, not from wgraph's reader).
EXPECTED = {
    "llama": dict(model_type="llama", head_dim=8, rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False),
    "llama_bias": dict(model_type="llama", num_hidden_layers=1, qkv_bias=True, o_bias=True, mlp_bias=True,
                       tie_word_embeddings=True, rope_theta=100000.0),
    "qwen2": dict(model_type="qwen2", qkv_bias=True, o_bias=False, layer_windows=(0, 4), tie_word_embeddings=True,
                  rope_theta=1e6),
    "qwen3": dict(model_type="qwen3", head_dim=16, qk_norm=True, qkv_bias=False, rope_theta=1e6),
    "mistral": dict(model_type="mistral", layer_windows=(4, 4), rope_theta=10000.0),
    "gemma2": dict(model_type="gemma2", head_dim=16, activation="gelu_tanh", norm_offset=1.0, sandwich_norms=True,
                   embed_scale=float(math.sqrt(32.0)), query_pre_attn_scalar=24.0, attn_softcap=5.0,
                   final_softcap=3.0, layer_windows=(4, 0), tie_word_embeddings=True),
}


@pytest.mark.parametrize("case", CASES)
def test_transformers_configs_read_alike_in_both_formats(case):
    v5, v4 = DecoderConfig.from_dict(hf_config(case)), DecoderConfig.from_dict(hf_config(case, "v4"))
    assert v5 == v4
    for field, want in EXPECTED[case].items():
        got = getattr(v5, field)
        assert got == pytest.approx(want, rel=1e-7) if isinstance(want, float) else got == want, (field, got, want)
    assert (v5.vocab_size, v5.hidden_size, v5.intermediate_size, v5.num_attention_heads,
            v5.num_key_value_heads) == (96, 32, 48, 4, 2)


def with_key(case: str, key: str, value) -> dict:
    d = hf_config(case)
    if "." in key:
        outer, inner = key.split(".")
        d[outer] = dict(d[outer], **{inner: value})
    else:
        d[key] = value
    return d


LLAMA3 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


@pytest.mark.parametrize("case,key,value,match", [
    # the values issue 26 found accepted or converted
    ("llama", "rope_parameters.original_max_position_embeddings", 8192.7,
     r"original_max_position_embeddings=8192\.7 must be an integer"),
    ("llama", "rope_parameters.factor", math.inf, r"rope_parameters\.factor=inf must be a finite number"),
    ("llama", "rope_parameters.factor", "8", r'rope_parameters\.factor="8" must be a finite number'),
    ("llama", "rope_parameters.factor", 0.5, r"factor >= 1"),
    ("llama", "rope_parameters.low_freq_factor", 5.0, r"low_freq_factor < high_freq_factor"),
    ("llama", "attention_bias", "true", r'attention_bias="true" must be true or false'),
    ("llama", "mlp_bias", 1, r"mlp_bias=1 must be true or false"),
    # numbers: exact types, finite, in range
    ("llama", "hidden_size", "32", r'hidden_size="32" must be an integer'),
    ("llama", "hidden_size", 32.0, r"hidden_size=32.0 must be an integer"),
    ("llama", "num_hidden_layers", True, r"num_hidden_layers=true must be an integer"),
    ("llama", "vocab_size", -1, r"vocab_size=-1 must be an integer in \[1,"),
    ("llama", "num_key_value_heads", 3, r"num_attention_heads=4 is not a multiple of num_key_value_heads=3"),
    ("llama", "head_dim", 7, r"head_dim=7 must be even"),
    ("llama", "rms_norm_eps", math.nan, r"rms_norm_eps=nan must be a finite number > 0"),
    ("llama", "rms_norm_eps", 0, r"rms_norm_eps=0 must be a finite number > 0"),
    ("llama", "rope_parameters.rope_theta", "10000", r'rope_parameters\.rope_theta="10000" must be a finite'),
    ("llama", "rope_parameters.rope_theta", -1.0, r"rope_theta=-1\.0 must be a finite number > 1"),
    ("llama", "tie_word_embeddings", "false", r'tie_word_embeddings="false" must be true or false'),
    ("llama", "max_position_embeddings", 64.5, r"max_position_embeddings=64.5 must be an integer"),
    ("llama", "partial_rotary_factor", 1.5, r"partial_rotary_factor=1\.5 must be a finite number > 0 and <= 1"),
    ("llama", "partial_rotary_factor", 0.5, r"partial_rotary_factor=0\.5 \(RoPE on part of each head\) is refused"),
    ("llama", "rope_parameters.partial_rotary_factor", 0.25, r"rope_parameters\.partial_rotary_factor=0\.25 \(RoPE"),
    ("llama", "hidden_act", "relu", r'hidden_act="relu" must be one of'),
    ("llama", "hidden_act", 3, r"hidden_act=3 must be one of"),
    # RoPE types and fields
    ("llama", "rope_parameters", {"rope_type": "yarn", "factor": 4.0}, r'rope_type "yarn" is not supported'),
    ("llama", "rope_parameters", {"rope_type": "dynamic", "factor": 4.0}, r'rope_type "dynamic" is not supported'),
    ("llama", "rope_parameters", dict(LLAMA3, beta_fast=32.0), r"rope_parameters\.beta_fast is not a field"),
    ("llama", "rope_parameters", {"rope_type": "llama3", "factor": 8.0}, r"lacks \['low_freq_factor'"),
    ("llama", "rope_parameters", "default", r'rope_parameters="default" must be an object or null'),
    ("llama", "rope_parameters", {"rope_type": "linear"}, r"lacks \['factor'\]"),
    # null where transformers 5.25 computes with it (None ** ...: it fails to build the model); read as absent,
    # they made a model of theta 10000
    ("llama", "rope_parameters.rope_theta", None, r"rope_parameters\.rope_theta=null: transformers computes"),
    ("llama", "rope_parameters.partial_rotary_factor", None, r'partial_rotary_factor=null \(rope_type "llama3"\)'),
    # the architecture
    ("llama", "model_type", "gpt2", r'model_type "gpt2" is not supported'),
    ("llama", "architectures", ["LlamaForSequenceClassification"], r"'LlamaForSequenceClassification'; supported"),
    ("llama", "architectures", ["MistralForCausalLM"], r"names 'MistralForCausalLM' but model_type 'llama'"),
    ("llama", "architectures", "LlamaForCausalLM", r"must be a list of one class name"),
    # windows and Gemma 2's keys
    ("mistral", "sliding_window", 0, r"sliding_window=0 must be an integer in \[1,"),
    ("mistral", "sliding_window", 4.5, r"sliding_window=4.5 must be an integer"),
    ("qwen2", "use_sliding_window", "yes", r'use_sliding_window="yes" must be true or false'),
    ("qwen2", "layer_types", ["full_attention"], r"must list 'full_attention' or 'sliding_attention' for each of"),
    ("qwen2", "layer_types", ["full_attention", "local"], r"must list"),
    ("qwen2", "use_sliding_window", False, r"sliding_attention layers but no sliding window"),
    ("qwen2", "max_window_layers", -1, r"max_window_layers=-1 must be an integer"),
    ("gemma2", "query_pre_attn_scalar", "24", r'query_pre_attn_scalar="24" must be a finite number'),
    ("gemma2", "attn_logit_softcapping", math.inf, r"attn_logit_softcapping=inf must be a finite number"),
    ("gemma2", "final_logit_softcapping", -3.0, r"final_logit_softcapping=-3.0 must be a finite number > 0"),
    # the model computes with these in f32: outside a normal f32 the ops refused them as the model was built,
    # naming the op's eps, scale or softcap, not the key
    ("llama", "rms_norm_eps", 1e-40, r"rms_norm_eps=1e-40 must be a finite number in \[1.1754944e-38, 3.4028235e\+38\]"),
    ("llama", "rms_norm_eps", 1e39, r"rms_norm_eps=1e\+39 must be a finite number in \["),
    ("gemma2", "query_pre_attn_scalar", 1e-300, r"query_pre_attn_scalar=1e-300 must be a finite number in \["),
    ("gemma2", "attn_logit_softcapping", 1e300, r"attn_logit_softcapping=1e\+300 must be a finite number in \["),
    ("gemma2", "final_logit_softcapping", 5e-324, r"final_logit_softcapping=5e-324 must be a finite number in \["),
    ("gemma2", "use_bidirectional_attention", True, r"use_bidirectional_attention=true"),
    ("gemma2", "hidden_act", "gelu", r"hidden_act=\"gelu\" and hidden_activation='gelu_pytorch_tanh' disagree"),
    ("gemma2", "sliding_window", None, r"sliding_attention layers but no sliding window"),
])
def test_bad_values_are_refused_by_name(case, key, value, match):
    with pytest.raises(CheckpointError, match=match):
        DecoderConfig.from_dict(with_key(case, key, value))


@pytest.mark.parametrize("case,key", [("llama", "rms_norm_eps"), ("llama", "rope_parameters.rope_theta"),
                                      ("llama", "rope_parameters.factor"), ("llama", "rope_parameters.low_freq_factor"),
                                      ("gemma2", "query_pre_attn_scalar"), ("gemma2", "final_logit_softcapping")])
def test_integers_past_floats_range_are_refused_by_name(case, key):
    """A JSON integer past float's range (10**400 parses as a Python int) where a number goes raised OverflowError
    from math.isfinite: it is a CheckpointError naming the key, as inf is."""
    with pytest.raises(CheckpointError, match=rf"{re.escape(key)}=1000000000.*\.\.\. must be a finite number > "):
        DecoderConfig.from_dict(with_key(case, key, 10**400))
    with pytest.raises(CheckpointError, match=rf"{re.escape(key)}=-1000000000.*\.\.\. must be a finite number > "):
        DecoderConfig.from_dict(with_key(case, key, -10**400))


@pytest.mark.parametrize("case,key,value", [
    ("llama", "quantization_config", {"quant_method": "gptq", "bits": 4}),
    ("llama", "rope_interleaved", True),          # harmless only when false
    ("llama", "temperature", 0.7),                # harmless only at transformers' default
    ("llama", "is_encoder_decoder", True),
    ("llama", "layer_types", ["full_attention", "full_attention"]),  # Llama's transformers model does not read it
    ("llama", "sliding_window", 4),
    ("llama", "attn_logit_softcapping", 50.0),
    ("qwen2", "attention_bias", False),           # Qwen2's biases are fixed; transformers ignores the key
    ("mistral", "qk_norm", True),
    ("llama", "some_future_key", 1),
])
def test_unknown_keys_are_refused_by_name(case, key, value):
    with pytest.raises(CheckpointError, match=rf"key '{key}' .* is not known to wgraph for model_type '{case}'"):
        DecoderConfig.from_dict(with_key(case, key, value))


def test_harmless_keys_are_read_past():
    base = DecoderConfig.from_dict(hf_config("llama"))
    d = hf_config("llama")
    d.update({k: "anything" for k in HARMLESS if k != "architectures"})
    d.update(HARMLESS_AT_DEFAULT)
    d["temperature"] = 1  # an integer equal to the default float
    assert DecoderConfig.from_dict(d) == base


def test_omitted_keys_take_transformers_defaults():
    """A key config.json omits means what transformers' config class says (checked against transformers by
    tests/data/make_arch_checkpoints.py): Gemma 2 and Qwen3 have their own head_dim, Mistral windows 4096 keys,
    Gemma 2 ties its embeddings and caps its logits."""
    def without(case, *keys):
        d = hf_config(case)
        for k in keys:
            d.pop(k)
        return DecoderConfig.from_dict(d)

    assert without("gemma2", "head_dim").head_dim == 256
    assert without("qwen3", "head_dim").head_dim == 128
    assert without("llama", "head_dim").head_dim == 32 // 4
    assert without("mistral", "sliding_window").layer_windows == (4096, 4096)
    g = without("gemma2", "tie_word_embeddings", "final_logit_softcapping", "attn_logit_softcapping",
                "query_pre_attn_scalar", "layer_types")
    assert (g.tie_word_embeddings, g.final_softcap, g.attn_softcap, g.query_pre_attn_scalar,
            g.layer_windows) == (True, 30.0, 50.0, 256.0, (4, 0))
    assert without("qwen2", "layer_types").layer_windows == (0, 4)  # from max_window_layers=1
    assert without("llama", "rope_parameters").rope_theta == 10000.0
    with pytest.raises(CheckpointError, match="required key 'num_hidden_layers' is missing"):
        without("llama", "num_hidden_layers")


def test_null_means_what_transformers_reads():
    assert DecoderConfig.from_dict(with_key("mistral", "sliding_window", None)).layer_windows == ()
    assert DecoderConfig.from_dict(with_key("gemma2", "final_logit_softcapping", None)).final_softcap == 0.0
    assert DecoderConfig.from_dict(with_key("llama", "num_key_value_heads", None)).num_key_value_heads == 4
    assert DecoderConfig.from_dict(with_key("llama", "rope_parameters", None)).rope_theta == 10000.0
    # architectures alone picks the model type
    d = hf_config("qwen3")
    del d["model_type"]
    assert DecoderConfig.from_dict(d).model_type == "qwen3"


def test_null_rope_theta_is_refused_where_transformers_fails():
    """transformers 5.25 takes the RoPE base from the RoPE object (rope_scaling replacing rope_parameters), else
    from the top-level rope_theta, and fails on null (`None ** ...`, checked by make_arch_checkpoints.py); wgraph
    read a null as absent and made a model of theta 10000. A null top-level rope_theta beside a theta in the
    object, and a null partial_rotary_factor in a default RoPE object, transformers runs: read alike."""
    v4 = hf_config("llama", "v4")  # top-level rope_theta 500000 with llama3 rope_scaling
    refused = [dict(v4, rope_theta=None, rope_scaling=None),
               dict(v4, rope_theta=None),
               dict(v4, rope_scaling={"type": "linear", "factor": 2.0, "rope_theta": None})]
    for d in refused:
        with pytest.raises(CheckpointError, match=r"rope_theta=null.*transformers computes the RoPE frequencies"):
            DecoderConfig.from_dict(d)
    base = DecoderConfig.from_dict(v4)
    assert DecoderConfig.from_dict(dict(v4, rope_theta=None, rope_scaling=dict(v4["rope_scaling"],
                                                                                rope_theta=500000.0))) == base
    plain = with_key("qwen3", "rope_parameters.partial_rotary_factor", None)
    assert DecoderConfig.from_dict(plain) == DecoderConfig.from_dict(hf_config("qwen3"))


@pytest.mark.parametrize("case,key,then", [("qwen2", "head_dim", "hidden_size // num_attention_heads"),
                                           ("qwen3", "head_dim", "128"), ("gemma2", "head_dim", "256"),
                                           ("gemma2", "num_key_value_heads", "4"),
                                           ("mistral", "num_key_value_heads", "8")])
def test_null_attention_sizes_are_refused_where_transformers_fails(case, key, then):
    """head_dim: null (Qwen2, Qwen3, Gemma 2) and num_key_value_heads: null (Gemma 2, Mistral): transformers 5.25
    fails to build the model (make_arch_checkpoints.py checks it), wgraph read them as absent: hidden / heads and
    all heads (the tiny Qwen3 and Gemma 2 then loaded a model of head_dim 8 where transformers has none, the tiny
    Mistral one of 4 KV heads)."""
    with pytest.raises(CheckpointError, match=rf"{key}=null: transformers' \w+ForCausalLM sizes its attention with "
                                              rf"it and fails; give a number or omit the key \(then {then}\)"):
        DecoderConfig.from_dict(with_key(case, key, None))
    # where transformers reads null as absent, so does wgraph
    assert DecoderConfig.from_dict(with_key("llama", "head_dim", None)).head_dim == 8
    assert DecoderConfig.from_dict(with_key("mistral", "head_dim", None)).head_dim == 8
    assert DecoderConfig.from_dict(with_key("qwen3", "num_key_value_heads", None)).num_key_value_heads == 4


def test_partial_rotary_and_linear_rope():
    c = DecoderConfig.from_dict(with_key("qwen3", "partial_rotary_factor", 1.0))  # every dim: accepted
    assert (c.rotary_dim, c.rope_dim, len(c.inv_freq())) == (None, 16, 8)
    c = attrs.evolve(c, rotary_dim=8)  # part of the head: only set in code (config.json's factor is refused)
    assert (c.rope_dim, len(c.inv_freq())) == (8, 4)
    assert c.inv_freq()[1] == pytest.approx(1e6 ** (-2 / 8), rel=1e-15)  # exponents over the rotary dims
    lin = DecoderConfig.from_dict(with_key("llama", "rope_parameters",
                                           {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}))
    plain = DecoderConfig.from_dict(with_key("llama", "rope_parameters", {"rope_type": "default", "rope_theta": 1e4}))
    assert lin.inv_freq() == pytest.approx(plain.inv_freq() / 4.0, rel=1e-15)


def test_rope_factors_whose_angles_overflow_are_refused():
    """A linear RoPE factor of 5e-324 (a JSON number > 0, so accepted) made every inverse frequency inf and the
    model's cos / sin tables NaN; the frequencies must give finite angles for every position a model may have. A
    factor of 1e-300 still does (1e300 x 2^20), and reads."""
    for fmt_key in ("rope_parameters", "rope_scaling"):
        d = hf_config("llama", "v4")
        d.pop("rope_scaling", None)
        d[fmt_key] = {"rope_type": "linear", "factor": 5e-324}
        with pytest.raises(CheckpointError, match=r"RoPE scaling \{'factor': 5e-324\} \(rope_theta=500000\.0\) gives "
                                                  r"inverse frequencies \[inf, inf, inf, inf\]\.\.\.; the angles of "
                                                  r"1048576 positions must be finite"):
            DecoderConfig.from_dict(d)
    ok = DecoderConfig.from_dict(with_key("llama", "rope_parameters", {"rope_type": "linear", "factor": 1e-300}))
    assert np.isfinite(ok.inv_freq()).all()


def test_file_errors(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("{not json")
    with pytest.raises(CheckpointError, match="is not valid JSON"):
        DecoderConfig.from_file(p)
    p.write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="must hold a JSON object, got list"):
        DecoderConfig.from_file(p)
    p.write_text('{"a": ' + "[" * 100000 + "]" * 100000 + "}")
    with pytest.raises(CheckpointError, match="is not valid JSON: RecursionError"):
        DecoderConfig.from_file(p)
    p.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(CheckpointError, match="is not UTF-8 text"):
        DecoderConfig.from_file(p)


@pytest.mark.parametrize("fmt", ["v5", "v4"])
def test_any_json_value_of_any_key_is_a_checkpoint_error_or_read(fmt):
    """Every key of each architecture's config (and of its RoPE object) replaced by JSON values of every type:
    the reader takes the value or raises CheckpointError naming it, never another exception (a list as model_type
    or rope_type raised TypeError: `python -m wgraph generate` printed a traceback)."""
    weird = (["x"], {"a": 1}, None, "str", 1.5, True, -1, 2**40, [], {})
    for case in CASES:
        base = hf_config(case, fmt)
        keys = [(k, None) for k in base] + [(k, i) for k, v in base.items() if isinstance(v, dict) for i in v]
        for key, inner in keys:
            for value in weird:
                d = json.loads(json.dumps(base))
                if inner is None:
                    d[key] = value
                else:
                    d[key][inner] = value
                try:
                    DecoderConfig.from_dict(d)
                except CheckpointError:
                    pass


# config.json of Qwen/Qwen2.5-0.5B as published (transformers 4.40.1 wrote it); DeepSeek-R1-Distill-Qwen's hold the
# same "use_mrope": false
QWEN25_05B = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643,
    "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02, "intermediate_size": 4864,
    "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 14,
    "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 32768, "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.40.1",
    "use_cache": True, "use_mrope": False, "use_sliding_window": False, "vocab_size": 151936}


def test_published_qwen25_config_reads():
    """Qwen2.5-0.5B's config.json was refused for its "use_mrope": false (a key wgraph did not know), though
    transformers' Qwen2 never reads it and false means the plain RoPE Qwen2 computes; true is still refused."""
    c = DecoderConfig.from_dict(QWEN25_05B)
    assert (c.model_type, c.head_dim, c.num_key_value_heads, c.qkv_bias, c.o_bias, c.layer_windows, c.rope_theta,
            c.tie_word_embeddings) == ("qwen2", 64, 2, True, False, (), 1e6, True)
    with pytest.raises(CheckpointError, match=r"key 'use_mrope' \(= true\) is not known to wgraph"):
        DecoderConfig.from_dict(dict(QWEN25_05B, use_mrope=True))


# config.json of google/gemma-2-9b-it as published (transformers 4.42.0.dev0 wrote it; gemma-2-27b's also holds
# sliding_window_size)
GEMMA2_9B = {
    "architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
    "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 16,
    "num_hidden_layers": 42, "num_key_value_heads": 8, "pad_token_id": 0, "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "sliding_window_size": 4096,
    "torch_dtype": "bfloat16", "transformers_version": "4.42.0.dev0", "use_cache": True, "vocab_size": 256000}


def test_published_gemma2_9b_config_reads():
    """gemma-2-9b's config.json was refused for its "sliding_window_size": 4096 (a key wgraph did not know), which
    transformers' Gemma 2 never reads (it windows by sliding_window); equal to sliding_window it is read past, a
    different value (two windows, no one meaning) refused by name."""
    c = DecoderConfig.from_dict(GEMMA2_9B)
    assert (c.model_type, c.head_dim, c.query_pre_attn_scalar, c.attn_softcap, c.final_softcap) == \
        ("gemma2", 256, 256.0, 50.0, 30.0)
    assert c.layer_windows == (4096, 0) * 21
    with pytest.raises(CheckpointError, match=r"sliding_window_size=2048 and sliding_window=4096 disagree"):
        DecoderConfig.from_dict(dict(GEMMA2_9B, sliding_window_size=2048))
    with pytest.raises(CheckpointError, match=r"sliding_window_size=4096.0 must be an integer"):
        DecoderConfig.from_dict(dict(GEMMA2_9B, sliding_window_size=4096.0))
    assert DecoderConfig.from_dict(dict(GEMMA2_9B, sliding_window_size=None)) == c


@pytest.mark.parametrize("change,match", [
    (dict(rope_theta=0.0), r"rope_theta=0\.0 must be a finite number > 1"),
    (dict(rope_theta=-5.0), r"rope_theta=-5\.0 must be a finite number > 1"),
    (dict(rope_theta=math.nan), r"rope_theta=nan must be a finite number > 1"),
    (dict(rope_scaling=LinearRopeScaling(5e-324)), r"rope_scaling=LinearRopeScaling\(factor=5e-324\) gives inverse "
                                                   r"frequencies \[inf, inf, inf, inf\]"),
    (dict(query_pre_attn_scalar=0.0), r"query_pre_attn_scalar=0\.0 must be a finite number > 0"),
    (dict(query_pre_attn_scalar=-4.0), r"query_pre_attn_scalar=-4\.0 must be a finite number > 0"),
    (dict(norm_offset=math.nan), r"norm_offset=nan must be a finite number$"),
    (dict(embed_scale=math.inf), r"embed_scale=inf must be a finite number > 0"),
    (dict(head_dim=0), r"head_dim=0 must be an even number >= 2"),
    (dict(num_hidden_layers=-1), r"num_hidden_layers=-1 must be an integer in \[1, 1024\]"),
    (dict(num_hidden_layers=0), r"num_hidden_layers=0 must be an integer in \[1, 1024\]"),
    (dict(hidden_size=0), r"hidden_size=0 must be an integer in \[1, 1048576\]"),
    (dict(vocab_size=True), r"vocab_size=True must be an integer in \[1, 4194304\]"),
    (dict(intermediate_size=64.0), r"intermediate_size=64\.0 must be an integer in \[1, 1048576\]"),
    (dict(max_position_embeddings=0), r"max_position_embeddings=0 must be an integer in \[1, 16777216\]"),
    (dict(num_key_value_heads=3), r"num_key_value_heads=3 must be an integer in \[1, 4\] dividing "
                                  r"num_attention_heads=4"),
    # flags were taken by truth: tie_word_embeddings="no" tied a model without lm_head.weight, silently
    (dict(tie_word_embeddings="no"), r"tie_word_embeddings='no' must be True or False"),
    (dict(qkv_bias=1), r"qkv_bias=1 must be True or False"),
    (dict(rope_interleaved=None), r"rope_interleaved=None must be True or False"),
    # rotary_dim=4.0 passed (4.0 % 2 == 0) and reached Graph.state as a shape (8, 2.0)
    (dict(rotary_dim=4.0), r"rotary_dim=4\.0 must be an integer"),
    (dict(rms_norm_eps=True), r"rms_norm_eps=True must be a finite number > 0"),
])
def test_a_config_built_in_code_is_checked(change, match):
    """A DecoderConfig built in code (docs/models.md: rope_interleaved only this way) skipped from_dict's checks:
    rope_theta 0, -5 or NaN and a linear factor of 5e-324 built models whose cos / sin tables, and so logits, were
    NaN (no error); query_pre_attn_scalar 0 and head_dim 0 raised ZeroDivisionError as the model was built, -4 an
    ArgumentError about a complex attention scale; a NaN norm_offset made NaN logits. The sizes too: a Llama of
    num_hidden_layers=-1 was built with no layer at all (its logits the embedding's through the final norm, no
    error), hidden_size=0 raised a bare ZeroDivisionError, vocab_size=True a bare TypeError, 3 kv heads of 4 a
    ShapeError from a graph node as the model was built."""
    base = DecoderConfig.from_dict(hf_config("gemma2"))
    with pytest.raises(CheckpointError, match=r"DecoderConfig: " + match):
        attrs.evolve(base, **change)
    assert attrs.evolve(base, rope_theta=2.0, norm_offset=-1.0, query_pre_attn_scalar=0.5).attention_scale == 2 ** 0.5


@pytest.mark.parametrize("scaling,match", [
    (LinearRopeScaling(-2.0), r"LinearRopeScaling\(factor=-2\.0\): factor must be a finite number > 0"),
    (LinearRopeScaling("2"), r"LinearRopeScaling\(factor='2'\): factor must be"),
    (LinearRopeScaling(True), r"LinearRopeScaling\(factor=True\): factor must be"),
    (RopeScaling(8.0, 4.0, 1.0, 16), r"RopeScaling\(factor=8\.0, low_freq_factor=4\.0.* needs .*low_freq_factor < "),
    (RopeScaling(8.0, 2.0, 2.0, 16), r"RopeScaling.*low_freq_factor=2\.0, high_freq_factor=2\.0.* needs"),
    (RopeScaling(-8.0, 1.0, 4.0, 16), r"RopeScaling\(factor=-8\.0.* needs .*factor >= 1"),
    (RopeScaling(8.0, 0.0, 4.0, 16), r"RopeScaling.*low_freq_factor=0\.0.* needs finite factors > 0"),
    (RopeScaling(8.0, 1.0, 4.0, 0), r"RopeScaling.*original_max_position_embeddings=0\) needs .*integer in "
                                      r"\[1, 16777216\]"),
    (RopeScaling(8.0, 1.0, 4.0, 16.5), r"RopeScaling.*original_max_position_embeddings=16\.5\) needs"),
    ({"rope_type": "linear", "factor": 2.0}, r"\{'rope_type': 'linear', 'factor': 2\.0\} must be None, a "
                                             r"LinearRopeScaling or a RopeScaling"),
])
def test_rope_scaling_built_in_code_follows_the_config_rules(scaling, match):
    """A DecoderConfig's rope_scaling built in code was checked only for finite frequencies: LinearRopeScaling(-2.0)
    built a model rotating every pair backwards, RopeScaling with low_freq_factor >= high_freq_factor or
    original_max_position_embeddings 0 (both refused in a config.json) another band split than Llama 3's (no
    error); a string factor raised a bare TypeError, low_freq_factor 0 a ZeroDivisionError, a dict an
    AttributeError. Each is a CheckpointError naming the value, by read_rope's rules."""
    base = DecoderConfig.from_dict(hf_config("llama"))
    with pytest.raises(CheckpointError, match=r"^DecoderConfig: rope_scaling=" + match):
        attrs.evolve(base, rope_scaling=scaling)
    # what a config.json may say, in code too: a linear factor below 1 (transformers only warns) and Llama 3's own
    assert attrs.evolve(base, rope_scaling=LinearRopeScaling(0.5)).inv_freq()[0] == 2.0
    llama3 = attrs.evolve(base, rope_scaling=RopeScaling(8.0, 1.0, 4.0, 8192))
    assert llama3 == DecoderConfig.from_dict(dict(hf_config("llama"), rope_parameters={
        "rope_type": "llama3", "rope_theta": base.rope_theta, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}))


def test_a_config_built_in_code_holds_plain_values():
    """Numbers by args' rule: np.float32(1e-6) as rms_norm_eps, np.int64(10000) as rope_theta and np.float16(1.0) as
    embed_scale were refused where np.float64 and Python numbers passed; numpy integers passed the size checks and
    stayed numpy integers in the config. Each is held as the plain value it is, so the configs are equal."""
    base = DecoderConfig.from_dict(hf_config("gemma2"))
    spelled = attrs.evolve(base, rms_norm_eps=np.float32(0.5), rope_theta=np.int64(10000), embed_scale=np.float16(2.0),
                           hidden_size=np.int16(base.hidden_size), head_dim=np.uint8(base.head_dim),
                           rotary_dim=np.int64(base.head_dim // 2), tie_word_embeddings=np.bool_(True),
                           layer_windows=tuple(map(np.int32, base.layer_windows)),
                           activation=np.str_(base.activation))
    plain = attrs.evolve(base, rms_norm_eps=0.5, rope_theta=10000.0, embed_scale=2.0, rotary_dim=base.head_dim // 2,
                         tie_word_embeddings=True)
    assert spelled == plain
    for f in attrs.fields(DecoderConfig):
        value = getattr(spelled, f.name)
        assert not isinstance(value, np.generic) and not any(isinstance(v, np.generic) for v in (
            value if isinstance(value, tuple) else ())), (f.name, value)
