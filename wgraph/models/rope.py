"""RoPE settings of a config.json, in either format, and the frequencies they define.

transformers 4 writes top-level `rope_theta` and `rope_scaling` ({rope_type | type, <fields>} or null);
transformers 5 writes only `rope_parameters` ({rope_theta, rope_type, <fields>}). transformers 5 reads the new
one, lets an old `rope_scaling` replace it and an old `rope_theta` fill a missing theta; a config whose two
formats disagree has no one meaning and is refused. Supported types: default, linear (positions divided by
`factor`) and llama3 (frequency bands). `partial_rotary_factor` is accepted only at 1.0: transformers 5.25's
classes of these architectures rotate every dim of the head with default RoPE whatever it says, and fail with
linear or llama3 RoPE, so a smaller factor has no one meaning (DecoderConfig.rotary_dim, set in code, does
rotate part of each head)."""

from __future__ import annotations

import math

import attrs
import numpy as np

from wgraph.errors import CheckpointError
from wgraph.models.config_values import integer, real, shown

DEFAULT_THETA = 10000.0  # transformers' default_theta, when no format names one
FIELDS = {  # the keys each rope_type may hold (besides rope_type / type, rope_theta, partial_rotary_factor)
    "default": (),
    "linear": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}


@attrs.frozen
class RopeScaling:
    """Llama 3's frequency-dependent scaling (`rope_type: "llama3"`): long wavelengths divided by `factor`, short
    ones kept, a smooth blend between."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int


@attrs.frozen
class LinearRopeScaling:
    """Linear position interpolation (`rope_type: "linear"`): every frequency divided by `factor`."""

    factor: float


@attrs.frozen
class RopeSettings:
    theta: float
    scaling: RopeScaling | LinearRopeScaling | None


def _kind(where: str, v: dict) -> str:
    kind = v.get("rope_type", v.get("type", "default"))
    if "rope_type" in v and "type" in v and v["rope_type"] != v["type"]:
        raise CheckpointError(f"config.json: {where} has rope_type {shown(v['rope_type'])} and type {shown(v['type'])}")
    if not isinstance(kind, str) or kind not in FIELDS:
        raise CheckpointError(f"config.json: {where} rope_type {shown(kind)} is not supported (supported: "
                              f"{sorted(FIELDS)}; dynamic, yarn and longrope change the math in ways wgraph "
                              f"does not implement)")
    return kind


def _scaling(where: str, v: dict) -> tuple[str, dict]:
    """(rope_type, its fields) of one RoPE object, every key checked."""
    kind = _kind(where, v)
    for key in v:
        if key not in ("rope_type", "type", "rope_theta", "partial_rotary_factor") + FIELDS[kind]:
            raise CheckpointError(f"config.json: {where}.{key} is not a field of rope_type {shown(kind)} "
                                  f"(known: {sorted(FIELDS[kind])}): refused rather than ignored")
    missing = [k for k in FIELDS[kind] if k not in v]
    if missing:
        raise CheckpointError(f"config.json: {where} (rope_type {shown(kind)}) lacks {missing}")
    fields: dict[str, float | int] = {}
    for key in FIELDS[kind]:
        if key == "original_max_position_embeddings":
            fields[key] = integer(f"{where}.{key}", v[key], 1, 1 << 24)
        else:
            fields[key] = real(f"{where}.{key}", v[key])
    return kind, fields


def read_rope(d: dict) -> RopeSettings:
    """The RoPE settings of config dict `d`, from either format; CheckpointError names a bad or conflicting
    key."""
    objs = {}
    for name in ("rope_parameters", "rope_scaling"):
        v = d.get(name)
        if v is not None and not isinstance(v, dict):
            raise CheckpointError(f"config.json: {name}={shown(v)} must be an object or null")
        if v is not None:
            objs[name] = v

    def stated(key: str) -> dict:
        found = {key: d[key]} if d.get(key) is not None else {}
        found.update({f"{name}.{key}": v[key] for name, v in objs.items() if v.get(key) is not None})
        return found

    _refuse_null_fields(d, objs)
    thetas = {where: real(where, v, lo=1.0) for where, v in stated("rope_theta").items()}
    if len(set(thetas.values())) > 1:
        raise CheckpointError(f"config.json: the RoPE base is given twice with different values ({thetas}); "
                              f"transformers 4 and 5 would read different models from it")
    for where, v in stated("partial_rotary_factor").items():
        if real(where, v, hi=1.0) != 1.0:
            raise CheckpointError(
                f"config.json: {where}={shown(v)} (RoPE on part of each head) is refused: transformers 5.25's "
                f"Llama, Qwen2, Qwen3, Mistral and Gemma 2 rotate every dim of the head with default RoPE (the "
                f"factor ignored) and fail with linear or llama3 RoPE, so the file has no one meaning")
    kinds = {name: _scaling(name, v) for name, v in objs.items()}
    if len(set(map(repr, kinds.values()))) > 1:
        raise CheckpointError(f"config.json: rope_parameters {objs['rope_parameters']} and rope_scaling "
                              f"{objs['rope_scaling']} disagree; transformers 4 and 5 would read different models "
                              f"from them")
    kind, fields = next(iter(kinds.values()), ("default", {}))
    scaling: RopeScaling | LinearRopeScaling | None = None
    if kind == "linear":
        scaling = LinearRopeScaling(fields["factor"])
    elif kind == "llama3":
        scaling = RopeScaling(fields["factor"], fields["low_freq_factor"], fields["high_freq_factor"],
                              int(fields["original_max_position_embeddings"]))
        if not _llama3_bands(scaling):
            raise CheckpointError(f"config.json: llama3 RoPE scaling {fields} needs factor >= 1 and "
                                  f"low_freq_factor < high_freq_factor")
    return RopeSettings(next(iter(thetas.values()), DEFAULT_THETA), scaling)


def _refuse_null_fields(d: dict, objs: dict) -> None:
    """CheckpointError for a null RoPE field that transformers 5.25 computes with (`None ** ...`: it fails to build
    the model), which wgraph read as absent (rope_theta 10000): `rope_theta: null` in the RoPE object it uses, or
    at the top level with no theta in that object; `partial_rotary_factor: null` in a linear or llama3 object
    (default RoPE never reads it). A null top-level partial_rotary_factor transformers skips, as wgraph does."""
    for name, v in objs.items():
        if "rope_theta" in v and v["rope_theta"] is None:
            raise CheckpointError(f"config.json: {name}.rope_theta=null: transformers computes the RoPE "
                                  f"frequencies with it and fails; give the base (a number > 1) or omit the key")
        if "partial_rotary_factor" in v and v["partial_rotary_factor"] is None \
                and v.get("rope_type", v.get("type")) in ("linear", "llama3"):
            raise CheckpointError(f"config.json: {name}.partial_rotary_factor=null (rope_type "
                                  f"{shown(v.get('rope_type', v.get('type')))}): transformers computes the rotary "
                                  f"dims with it and fails; give 1.0 or omit the key")
    if "rope_theta" in d and d["rope_theta"] is None and not any(v.get("rope_theta") is not None
                                                                  for v in objs.values()):
        raise CheckpointError("config.json: rope_theta=null and no RoPE object gives a rope_theta: transformers "
                              "computes the RoPE frequencies with null and fails; give the base (a number > 1) "
                              "or omit the key (then 10000)")


def _llama3_bands(s: RopeScaling) -> bool:
    """Whether Llama 3 scaling's factors make its bands (factor >= 1, low_freq_factor < high_freq_factor): the rule
    read_rope applies to a config.json and check_scaling to a scaling built in code."""
    return s.factor >= 1 and s.low_freq_factor < s.high_freq_factor


def check_scaling(where: str, s) -> None:
    """CheckpointError unless `s` is None or a scaling whose fields follow read_rope's rules for a config.json: a
    DecoderConfig built in code was checked only for finite frequencies, so LinearRopeScaling(-2.0) negated them,
    RopeScaling(8.0, 4.0, 1.0, 16) (low >= high) and original_max_position_embeddings=0 made other bands than
    transformers computes, and LinearRopeScaling("2") or a dict raised a bare TypeError / AttributeError."""
    def number(v) -> bool:
        return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)

    if s is None:
        return
    if isinstance(s, LinearRopeScaling):
        if not (number(s.factor) and s.factor > 0):
            raise CheckpointError(f"{where}: rope_scaling={s!r}: factor must be a finite number > 0")
        return
    if not isinstance(s, RopeScaling):
        raise CheckpointError(f"{where}: rope_scaling={s!r} must be None, a LinearRopeScaling or a RopeScaling "
                              f"(llama3)")
    reals = (s.factor, s.low_freq_factor, s.high_freq_factor)
    orig = s.original_max_position_embeddings
    if not (all(number(v) and v > 0 for v in reals) and _llama3_bands(s)
            and type(orig) is int and 1 <= orig <= 1 << 24):
        raise CheckpointError(f"{where}: rope_scaling={s!r} needs finite factors > 0 with factor >= 1 and "
                              f"low_freq_factor < high_freq_factor, and original_max_position_embeddings an integer "
                              f"in [1, {1 << 24}]")


def inv_freq(theta: float, scaling: RopeScaling | LinearRopeScaling | None, rotary_dim: int) -> np.ndarray:
    """RoPE inverse frequencies [rotary_dim / 2] in float64: theta ** (-2i / rotary_dim), divided by `factor`
    (linear) or rescaled per Llama 3 (long wavelengths divided by `factor`, short kept, a smooth blend between),
    as transformers' rope init functions compute them."""
    inv = theta ** (-np.arange(0, rotary_dim // 2, dtype=np.float64) * 2.0 / rotary_dim)
    s = scaling
    if s is None:
        return inv
    # extreme factors overflow (config.py refuses a result that is not finite); the blend also overflows in the
    # bands np.where does not take it from
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if isinstance(s, LinearRopeScaling):
            return inv / s.factor
        low_wavelen = s.original_max_position_embeddings / s.low_freq_factor
        high_wavelen = s.original_max_position_embeddings / s.high_freq_factor
        wavelen = 2 * np.pi / inv
        smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (
            s.high_freq_factor - s.low_freq_factor)
        blended = (1 - smooth) * inv / s.factor + smooth * inv
        return np.where(wavelen > low_wavelen, inv / s.factor, np.where(wavelen < high_wavelen, inv, blended))
