"""The rules for a value read from config.json: exact JSON types (an integer is a JSON integer, never a float
or a numeric string; a number is finite; a flag is true or false), checked before use, never converted first.
Errors are CheckpointErrors that name the key (`where`), show the value as JSON and state the rule."""

from __future__ import annotations

import json
import math
import sys

from wgraph.args import F32_TINY
from wgraph.dtypes import F32_MAX
from wgraph.errors import CheckpointError


def shown(value) -> str:
    """A value as config.json spells it (NaN and infinities as Python does), cut to 60 characters."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def refuse(where: str, value, rule: str):
    raise CheckpointError(f"config.json: {where}={shown(value)} {rule}")


def integer(where: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        refuse(where, value, f"must be an integer in [{lo}, {hi}]")
    return value


def real(where: str, value, *, lo: float = 0.0, hi: float = math.inf) -> float:
    """A finite number > lo and <= hi. A JSON integer past float's range (10**400) is not finite either: math.isfinite
    and float() raise OverflowError on it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or abs(value) > sys.float_info.max \
            or not math.isfinite(value) or not lo < value <= hi:
        refuse(where, value, f"must be a finite number > {lo:g}" + ("" if hi == math.inf else f" and <= {hi:g}"))
    return float(value)


def f32_normal(where: str, value) -> float:
    """A finite number that an f32 holds as a normal number, [F32_TINY, F32_MAX]: a norm's eps, a softcap and the
    base of the attention scale go into f32 uniforms, where the ops refuse a smaller one (0, or a subnormal a GPU may
    flush to 0) and a larger one (inf). Refused here, naming the key, rather than by an op as the model is built."""
    v = real(where, value)
    if not F32_TINY <= v <= F32_MAX:
        refuse(where, value, f"must be a finite number in [{F32_TINY:.8g}, {F32_MAX:.8g}] (a normal f32: the "
                             f"model computes with it in f32)")
    return v


def boolean(where: str, value) -> bool:
    if not isinstance(value, bool):
        refuse(where, value, "must be true or false")
    return value
