"""The argument rules: every public function checks its scalar arguments here, before it converts anything and
before any GPU work. A rule takes (function, argument name, value, limits) and returns the value as a plain
Python int / float / bool / tuple / str (what params hold: hashable, JSON-able, equal only to equal values), or
raises ArgumentError naming the function, the argument, the value and the rule.

The rules: an exact integer (numbers.Integral: Python and numpy integers, never a bool) within bounds; a finite
real (numbers.Real, never a bool; NaN and +-inf refused) within bounds; an exact bool (True, False or a numpy
bool; never 0, 1, None or a string); a name from a fixed set; a dtype (wgraph's name or numpy's or torch's spelling of
one, mapped by dtypes.dtype_name_of); a window pair; a list of ids; a shape. Nothing is
converted before it is checked, so 1.7 never becomes 1, "3" never 3 and None never False."""

from __future__ import annotations

import numbers

import attrs
import numpy as np

from wgraph.dtypes import ALIASES, DTYPES, F32_MAX, dtype_instead, dtype_name_of
from wgraph.errors import ArgumentError, DtypeError, WgraphError

U32_MAX = 0xFFFFFFFF
I32_MAX = 2**31 - 1
I64_MAX = 2**63 - 1
U64_MAX = 2**64 - 1  # a sampling seed's range (ops/sampling.py; the generate command's --seed)
F32_TINY = float(np.finfo(np.float32).tiny)  # f32's smallest normal
DTYPE_NAMES = tuple(sorted(DTYPES))
_SHOWN = 80  # characters of a bad value's repr in a message (an array's repr can be long)


def show(value) -> str:
    """A bad value as a message prints it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN - 3] + "..."


def _plain(value):
    """A numpy scalar as the Python number it is (tuples element by element); anything else as it is."""
    if isinstance(value, np.generic):
        return value.item()
    if type(value) is tuple:
        plain = tuple(_plain(v) for v in value)
        return value if all(a is b for a, b in zip(plain, value)) else plain  # unchanged: the same tuple
    return value


def _canonical_float(value):
    """A float field's value as the real rules below return it: a float, and +0.0 for either zero (a field that is 0
    for 'off' is off either way, and a params cache that finds -0.0 == 0.0 must not keep the first one's sign)."""
    return float(value) + 0.0 if is_real(value) else value


def plain_params(params):
    """An op's attrs params with every numpy scalar field made the Python value it is, and every float field (`float`
    or `float | None`) the float the real rules return: what `Program.update` is given comes from the caller
    (attrs.evolve(params, kv_start=np.int16(32700)), ScaleParams(2), ScaleParams(-0.0)), and an op's arithmetic on a
    numpy field is numpy's (int16 wraps, 1 / np.float16(1e-5) is inf), where a call's rules above return plain
    values. ScaleParams(2) kept an int factor and ScaleParams(-0.0) gave -0 outputs where scale(x, 0.0) gives +0."""
    changes = {f.name: _plain(getattr(params, f.name)) for f in attrs.fields(type(params)) if f.init}
    changes.update({f.name: _canonical_float(changes[f.name]) for f in attrs.fields(type(params))
                    if f.init and str(f.type).split(" |")[0] in ("float", "<class 'float'>")})
    changes = {k: v for k, v in changes.items() if v is not getattr(params, k)}
    return attrs.evolve(params, **changes) if changes else params


def fail(fn: str, name: str, value, rule: str, error: type = ArgumentError) -> WgraphError:
    """The error of one broken rule: `fn: name=value must be rule`."""
    return error(f"{fn}: {name}={show(value)} must be {rule}")


# Never numbers here: bools, and numpy's durations (np.timedelta64 subclasses np.signedinteger, so it is
# numbers.Integral: np.timedelta64(5) was the integer 5, np.timedelta64(1, 'D') a raw TypeError from int())
_NOT_NUMBERS = (bool, np.bool_, np.timedelta64)


def is_int(value) -> bool:
    """Whether `value` is an integer: a Python or numpy integer (numbers.Integral), never a bool."""
    # A plain int answers first: the ABC check costs ~0.5 µs, and an attention call asks ~10 times.
    return type(value) is int or (isinstance(value, numbers.Integral) and not isinstance(value, _NOT_NUMBERS))


def is_real(value) -> bool:
    """Whether `value` is a real number (numbers.Real: Python and numpy ints and floats), never a bool."""
    return type(value) is float or type(value) is int or (
        isinstance(value, numbers.Real) and not isinstance(value, _NOT_NUMBERS))


def _compared(value):
    """`value` as the range tests compare it: a numpy number as the Python number it is (exact). numpy compares an
    f16 with a Python float in f16, where F32_MAX is inf and F32_TINY is 0: np.float16(inf) <= F32_MAX held; and its
    integers wrap: abs(np.int64(-2**63)) is itself, negative (with an overflow warning)."""
    if isinstance(value, np.floating):
        return float(value)
    return int(value) if isinstance(value, np.integer) else value


def integer(fn: str, name: str, value, lo: int = 0, hi: int = U32_MAX) -> int:
    """`value` as an int: an integer in [lo, hi]."""
    if type(value) is int:
        if lo <= value <= hi:
            return value
    elif is_int(value) and lo <= value <= hi:
        return int(value)
    raise fail(fn, name, value, f"an integer in [{lo}, {hi}]")


def optional_integer(fn: str, name: str, value, lo: int = 0, hi: int = U32_MAX) -> int | None:
    """None, or `value` as an int in [lo, hi]."""
    if value is None:
        return None
    if type(value) is int and lo <= value <= hi:
        return value
    if is_int(value) and lo <= value <= hi:
        return int(value)
    raise fail(fn, name, value, f"an integer in [{lo}, {hi}] or None")


def real(fn: str, name: str, value, lo: float = -F32_MAX, hi: float = F32_MAX, *, open_lo: bool = False) -> float:
    """`value` as a float: a finite real in [lo, hi] ((lo, hi] with open_lo). The defaults are f32's range:
    every real that goes into a uniform is an f32."""
    # NaN fails every comparison and +-inf is past any finite bound: the range test is the finiteness test.
    # A plain float answers first: an op call (scale's factor, an eps) asks on every call.
    # + 0.0: -0.0 is 0.0 (see factor): a params cache finds -0.0 == 0.0 and kept the first one's sign
    if type(value) is float:
        if (lo < value if open_lo else lo <= value) and value <= hi:
            return value + 0.0
    elif is_real(value):
        v = _compared(value)
        if (lo < v if open_lo else lo <= v) and v <= hi:
            return float(value) + 0.0
    raise fail(fn, name, value, f"a finite real in {'(' if open_lo else '['}{lo:.8g}, {hi:.8g}]")


def normal_real(fn: str, name: str, value, *, or_zero: bool = False) -> float:
    """A positive real an f32 uniform divides by or adds to a square (a norm's eps, a softcap): a finite real from
    f32's smallest normal to its largest (or 0, where `or_zero`: off). A smaller one is 0 in the uniform (or a
    subnormal a GPU may flush to 0): eps=1e-50 normalised a row of zeros to NaN, softcap=1e-50 made a 0 score
    0 / 0."""
    # is_real first: `value == 0` of an array is an array, whose truth raised numpy's 'ambiguous' ValueError
    # + 0.0: softcap=-0.0 is off as 0.0 is; a params cache finds -0.0 == 0.0, so the first of the two kept its sign
    # in every later graph's JSON
    if is_real(value) and ((or_zero and value == 0) or F32_TINY <= _compared(value) <= F32_MAX):
        return float(value) + 0.0
    raise fail(fn, name, value, f"{'0 (off) or ' if or_zero else ''}a finite real in [{F32_TINY:.8g}, {F32_MAX:.8g}]")


def factor(fn: str, name: str, value) -> float:
    """A real an f32 uniform multiplies by (scale's factor): 0, or a finite real whose magnitude is from f32's
    smallest normal to its largest; a smaller one is 0 (or a subnormal a GPU may flush to 0) in the uniform:
    scale(1e30, 1e-50) gave 0, not 1e-20. -0.0 is 0.0: an op call's template is found by its params, where -0.0 ==
    0.0, so the first of the two a process used was the factor of both (scale(x, -0.0)'s zeros had the signs of the
    first call's)."""
    if is_real(value) and (value == 0 or F32_TINY <= abs(_compared(value)) <= F32_MAX):
        return float(value) + 0.0
    raise fail(fn, name, value, f"0 or a finite real of magnitude in [{F32_TINY:.8g}, {F32_MAX:.8g}]")


def eps(fn: str, value) -> float:
    """A norm's eps (normal_real): it goes into an f32 uniform added to a mean square."""
    return normal_real(fn, "eps", value)


def optional_real(fn: str, name: str, value) -> float | None:
    """None, or `value` as a float: a finite real in f32's range (see real)."""
    if value is None:
        return None
    if is_real(value) and -F32_MAX <= _compared(value) <= F32_MAX:
        return float(value) + 0.0   # -0.0 is 0.0, as in real
    raise fail(fn, name, value, f"a finite real in [{-F32_MAX:.8g}, {F32_MAX:.8g}] or None")


def flag(fn: str, name: str, value, error: type = ArgumentError) -> bool:
    """`value` as a bool: True or False (a numpy bool too), never 0, 1, None or a string; else `error` (a config's
    field: CheckpointError)."""
    if value is True or value is False:
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise fail(fn, name, value, "True or False", error)


def choice(fn: str, name: str, value, choices):
    """`value`, one of `choices` (strings, and None where None is one); compared only once its type fits. A str
    subclass (numpy's np.str_, an enum.StrEnum member) is compared by its characters and returned as the plain str
    the params hold."""
    if (value is None or type(value) is str) and value in choices:
        return value
    plain = plain_str(value)   # type(value) is str alone refused np.str_("tanh")
    if plain is not None and plain in choices:
        return plain
    raise fail(fn, name, value, f"one of {', '.join(map(repr, choices))}")


def plain_str(value) -> str | None:
    """`value` as the plain str choice and text take it, or None where it is no str: a str subclass (numpy's np.str_,
    an enum.StrEnum member) by its characters. For the callers that raise their own error (a lookup by name: "no
    such node"), so a name is one rule everywhere. str.__str__ reads the characters, never a subclass's own __eq__
    / __str__, so the value compared is the one returned."""
    if type(value) is str:
        return value
    return str.__str__(value) if isinstance(value, str) else None


_SPELLINGS = {name: spelling for spelling, name in ALIASES.items()}   # "f16" -> "float16"


def _dtype_rule(value, choices, optional: bool) -> str:
    """What a dtype argument must be, and what to do instead where `value` spells a dtype wgraph lacks."""
    # the example spells one of these choices ('bfloat16' was shown where bf16 was refused)
    long = [_SPELLINGS[c] for c in choices if c in _SPELLINGS]
    example = "" if not long else ", ".join(
        [f"'{long[0]}'"] + ([] if long[0] == "bfloat16" else [f"np.{long[0]}"]) + [f"torch.{long[0]}"])
    rule = (f"one of {', '.join(map(repr, choices))}{' or None' if optional else ''}"
            + (f" (or numpy's or torch's spelling of one, such as {example})" if example else ""))
    instead = dtype_instead(value)
    return f"{rule}; {instead}" if instead else rule


def dtype_name(fn: str, name: str, value, choices=None) -> str:
    """wgraph's name of the dtype `value` spells (dtypes.dtype_name_of: "f32", np.float32, "float32",
    torch.float32), one of `choices` when given; a DtypeError names the spelling, the choices and, for a dtype
    wgraph lacks (float64), what to do instead."""
    if type(value) is str and value in (DTYPES if choices is None else choices):   # every dev.empty asks
        return value
    return _mapped_dtype(fn, name, value, choices, False)


def optional_dtype_name(fn: str, name: str, value, choices=None) -> str | None:
    """None, or wgraph's name of the dtype `value` spells (see dtype_name)."""
    if value is None:
        return None
    if type(value) is str and value in (DTYPES if choices is None else choices):
        return value
    return _mapped_dtype(fn, name, value, choices, True)


def _mapped_dtype(fn: str, name: str, value, choices, optional: bool) -> str:
    """The spelled dtype's wgraph name (of `choices`), or the DtypeError of dtype_name / optional_dtype_name."""
    got = dtype_name_of(value)
    if got is not None and (choices is None or got in choices):
        return got
    raise fail(fn, name, value, _dtype_rule(value, DTYPE_NAMES if choices is None else choices, optional), DtypeError)


def text(fn: str, name: str, value) -> str:
    """`value`, a str (a name: of a graph, a value, a state, a node; a prompt), as a plain str: a str subclass
    (numpy's np.str_, an enum.StrEnum member) is read by its characters, as `choice` reads one."""
    plain = plain_str(value)   # type(value) is str alone refused np.str_("hi")
    if plain is not None:
        return plain
    raise fail(fn, name, value, "a str")


def window(fn: str, name: str, value) -> tuple[int, int]:
    """FlashAttention's window_size: a pair (left, right), each -1 (unbounded) or an integer in [0, 2^31 - 1]
    (the kernels hold the sides in i32)."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        left, right = value
        if is_int(left) and is_int(right) and -1 <= left <= I32_MAX and -1 <= right <= I32_MAX:
            return int(left), int(right)
    raise fail(fn, name, value, f"a pair (left, right), each -1 (unbounded) or an integer in [0, {I32_MAX}]")


def shape(fn: str, name: str, value) -> tuple[int, ...]:
    """`value` as a shape: a tuple or list of integers in [0, 2^32 - 1]."""
    if type(value) is tuple:   # a tuple of plain ints (every op's output spec) answers first
        for d in value:
            if type(d) is not int or d < 0 or d > U32_MAX:
                break
        else:
            return value
    if isinstance(value, (tuple, list)):
        if all(map(is_int, value)) and all(0 <= d <= U32_MAX for d in value):
            return tuple(map(int, value))
    raise fail(fn, name, value, f"a shape: a tuple of integers in [0, {U32_MAX}]")


def view_shape(fn: str, name: str, value) -> tuple[int, ...]:
    """A reshape's target as a tuple: integers in [0, 2^32 - 1], at most one of them -1 (inferred)."""
    if isinstance(value, (tuple, list)) and all(map(is_int, value)) and all(-1 <= d <= U32_MAX for d in value):
        if sum(d == -1 for d in value) <= 1:
            return tuple(map(int, value))
    raise fail(fn, name, value, f"a shape: a tuple of integers in [0, {U32_MAX}], at most one of them -1")


def ids(fn: str, name: str, value, lo: int = 0, hi: int = U32_MAX, *, ndim: int | None = 1) -> np.ndarray:
    """`value` as an int64 array of `ndim` dims (None: any): a list, tuple or numpy integer array whose every
    element is an integer in [lo, hi] (no bools, no floats, no strings; an empty list is an empty array)."""
    what = {None: "a list (or nested lists)", 1: "a list"}.get(ndim, f"a {ndim}-D list")
    rule = f"{what} of integers in [{lo}, {hi}] (Python or numpy integers, or a numpy integer array)"
    if isinstance(value, np.ndarray):
        if (ndim is not None and value.ndim != ndim) or not (value.dtype.kind in "iu" or value.size == 0):
            raise fail(fn, name, value, rule)
        arr = value.astype(np.int64) if value.size == 0 or value.max() <= I64_MAX else None
    elif isinstance(value, (list, tuple)):
        try:
            obj = np.empty(0, object) if len(value) == 0 else np.array(value, dtype=object)
        except ValueError:  # ragged
            raise fail(fn, name, value, rule) from None
        if (ndim is not None and obj.ndim != ndim and obj.size) or not all(map(is_int, obj.flat)):
            raise fail(fn, name, value, rule)
        if obj.size and not all(lo <= v <= hi for v in obj.flat):
            raise fail(fn, name, value, rule)
        arr = obj.astype(np.int64)
        if ndim is not None and arr.ndim != ndim:   # an empty [] where a 2-D list goes
            arr = arr.reshape((0,) * ndim)
    else:
        raise fail(fn, name, value, rule)
    if arr is None or (arr.size and (arr.min() < lo or arr.max() > hi)):
        raise fail(fn, name, value, rule)
    return arr

