"""`LlamaConfig`: the fields of a Hugging Face Llama `config.json` that the model uses, checked; the RoPE
frequencies they define (plain `rope_theta`, or Llama 3's scaling). RoPE settings come in two formats:
transformers 4 writes top-level `rope_theta` and `rope_scaling`; transformers 5 writes only
`rope_parameters: {rope_theta, rope_type, <scaling fields>}`. Both are read; a config holding both that
disagree is refused."""

from __future__ import annotations

import json
import math
from pathlib import Path

import attrs
import numpy as np

from wgraph.errors import CheckpointError

MODEL_TYPES = ("llama",)
MAX_DIM = 1 << 20            # any one size (hidden, intermediate, heads x head_dim); a bound against absurd files
MAX_VOCAB = 1 << 22
MAX_LAYERS = 1024
MAX_CONFIG_BYTES = 1 << 20   # config.json is a few KB; refuse to parse megabytes
# Fields that would change the math if set to these values; a model that uses them is refused, not misrun.
UNSUPPORTED = {"attention_bias": True, "mlp_bias": True}


@attrs.frozen
class RopeScaling:
    """Llama 3's frequency-dependent RoPE scaling (`rope_type: "llama3"`)."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int


@attrs.frozen
class LlamaConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling | None = None
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False

    @classmethod
    def from_dict(cls, d: dict) -> LlamaConfig:
        """Check a parsed config.json; CheckpointError names the bad field."""
        if not isinstance(d, dict):
            raise CheckpointError(f"config.json must hold a JSON object, got {type(d).__name__}")
        mt = d.get("model_type")
        if mt not in MODEL_TYPES:
            raise CheckpointError(f"config.json: model_type {mt!r} is not supported (supported: {list(MODEL_TYPES)})")
        for field, bad in UNSUPPORTED.items():
            if d.get(field, False) == bad:
                raise CheckpointError(f"config.json: {field}={bad!r} is not supported (the Llama model has no biases)")
        act = d.get("hidden_act", "silu")
        if act != "silu":
            raise CheckpointError(f"config.json: hidden_act {act!r} is not supported (only 'silu')")

        def integer(name, lo, hi, default=None):
            v = d.get(name, default)
            if v is None:
                raise CheckpointError(f"config.json: required field {name!r} is missing")
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise CheckpointError(f"config.json: {name}={v!r} must be an integer in [{lo}, {hi}]")
            return v

        def number(name, default, lo=0.0):
            v = d.get(name, default)
            if v is None:
                v = default
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not v > lo:
                raise CheckpointError(f"config.json: {name}={v!r} must be a finite number > {lo}")
            return float(v)

        hidden = integer("hidden_size", 1, MAX_DIM)
        heads = integer("num_attention_heads", 1, MAX_DIM)
        kv_heads = integer("num_key_value_heads", 1, heads, default=heads)
        if heads % kv_heads:
            raise CheckpointError(f"config.json: num_attention_heads={heads} is not a multiple of "
                                  f"num_key_value_heads={kv_heads}")
        default_hd = hidden // heads if hidden % heads == 0 else None
        head_dim = integer("head_dim", 2, MAX_DIM, default=default_hd)
        if head_dim % 2 or heads * head_dim > MAX_DIM:
            raise CheckpointError(f"config.json: head_dim={head_dim} must be even and heads x head_dim "
                                  f"({heads * head_dim}) at most {MAX_DIM}")
        tie = d.get("tie_word_embeddings", False)
        if not isinstance(tie, bool):
            raise CheckpointError(f"config.json: tie_word_embeddings={tie!r} must be true or false")
        return cls(
            vocab_size=integer("vocab_size", 1, MAX_VOCAB),
            hidden_size=hidden,
            intermediate_size=integer("intermediate_size", 1, MAX_DIM),
            num_hidden_layers=integer("num_hidden_layers", 1, MAX_LAYERS),
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=head_dim,
            rms_norm_eps=number("rms_norm_eps", 1e-6),
            **_rope_settings(d),
            max_position_embeddings=integer("max_position_embeddings", 1, 1 << 24, default=2048),
            tie_word_embeddings=tie,
        )

    @classmethod
    def from_file(cls, path) -> LlamaConfig:
        path = Path(path)
        try:
            size = path.stat().st_size
        except OSError as e:
            raise CheckpointError(f"cannot read {path}: {e}") from None
        if size > MAX_CONFIG_BYTES:
            raise CheckpointError(f"{path} is {size} bytes; a config.json of more than {MAX_CONFIG_BYTES} is refused")
        try:
            return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, UnicodeDecodeError) as e:
            if isinstance(e, CheckpointError):
                raise
            raise CheckpointError(f"{path} is not valid JSON: {e}") from None

    def inv_freq(self) -> np.ndarray:
        """RoPE inverse frequencies [head_dim / 2] in float64: theta ** (-2i / head_dim), rescaled per Llama 3
        when `rope_scaling` is set (long wavelengths divided by `factor`, short kept, a smooth blend between)."""
        d = self.head_dim
        inv = self.rope_theta ** (-np.arange(0, d // 2, dtype=np.float64) * 2.0 / d)
        s = self.rope_scaling
        if s is None:
            return inv
        low_wavelen = s.original_max_position_embeddings / s.low_freq_factor
        high_wavelen = s.original_max_position_embeddings / s.high_freq_factor
        wavelen = 2 * np.pi / inv
        smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (
            s.high_freq_factor - s.low_freq_factor)
        blended = (1 - smooth) * inv / s.factor + smooth * inv
        return np.where(wavelen > low_wavelen, inv / s.factor, np.where(wavelen < high_wavelen, inv, blended))


DEFAULT_ROPE_THETA = 10000.0  # transformers' default_theta, used when no format names one


def _rope_settings(d: dict) -> dict:
    """rope_theta and rope_scaling from either format. transformers 5 reads `rope_parameters` and, when a
    config also has the old keys, lets `rope_scaling` replace it and `rope_theta` fill a missing theta: a
    config whose two formats disagree has no one meaning, so it is refused."""
    params, scaling = d.get("rope_parameters"), d.get("rope_scaling")
    for name, v in (("rope_parameters", params), ("rope_scaling", scaling)):
        if v is not None and not isinstance(v, dict):
            raise CheckpointError(f"config.json: {name} must be an object or null, got {v!r}")
    thetas = {}  # where each stated theta comes from -> its value
    for where, v in (("rope_theta", d.get("rope_theta")), ("rope_parameters.rope_theta", (params or {}).get("rope_theta")),
                     ("rope_scaling.rope_theta", (scaling or {}).get("rope_theta"))):
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not v > 1.0:
                raise CheckpointError(f"config.json: {where}={v!r} must be a finite number > 1")
            thetas[where] = float(v)
    if len(set(thetas.values())) > 1:
        raise CheckpointError(f"config.json: the RoPE base is given twice with different values ({thetas}); "
                              f"transformers 4 and 5 would read different models from it")
    kinds = {}  # the scaling each format states, without its theta
    for where, v in (("rope_parameters", params), ("rope_scaling", scaling)):
        if v is not None:
            kinds[where] = {k: x for k, x in v.items() if k != "rope_theta"}
    if "rope_parameters" in kinds and "rope_scaling" in kinds \
            and _scaling_kind(kinds["rope_parameters"]) != _scaling_kind(kinds["rope_scaling"]):
        raise CheckpointError(f"config.json: rope_parameters {params} and rope_scaling {scaling} disagree; "
                              f"transformers 4 and 5 would read different models from them")
    chosen = kinds.get("rope_parameters", kinds.get("rope_scaling"))
    theta = next(iter(thetas.values()), DEFAULT_ROPE_THETA)
    return {"rope_theta": theta, "rope_scaling": _rope_scaling(chosen)}


def _scaling_kind(v: dict) -> dict:
    """A scaling dict with its type under one key (transformers 4 wrote `type`, later `rope_type`)."""
    out = {k: x for k, x in v.items() if k not in ("type", "rope_type")}
    out["rope_type"] = v.get("rope_type", v.get("type", "default"))
    return out


def _rope_scaling(v) -> RopeScaling | None:
    if v is None:
        return None
    kind = v.get("rope_type", v.get("type", "default"))
    if kind == "default":
        return None
    if kind != "llama3":
        raise CheckpointError(f"config.json: rope_scaling type {kind!r} is not supported (only 'llama3' and 'default')")
    try:
        s = RopeScaling(float(v["factor"]), float(v["low_freq_factor"]), float(v["high_freq_factor"]),
                        int(v["original_max_position_embeddings"]))
    except KeyError as e:
        raise CheckpointError(f"config.json: rope_scaling (llama3) lacks the field {e.args[0]!r}") from None
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"config.json: rope_scaling has a non-numeric field: {e}") from None
    if not (s.factor >= 1 and 0 < s.low_freq_factor < s.high_freq_factor and s.original_max_position_embeddings > 0):
        raise CheckpointError(f"config.json: rope_scaling {v} needs factor >= 1, 0 < low_freq_factor < "
                              f"high_freq_factor and original_max_position_embeddings > 0")
    return s
