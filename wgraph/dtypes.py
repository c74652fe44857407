"""The dtype table: the one place that says how each wgraph dtype is stored.

bf16 (bfloat16: the top half of an f32) is stored as 16-bit words, two per u32, element i in the low half of
word i / 2 when i is even; shaders widen it with `bitcast<f32>(u32(bits) << 16u)` (no extension). numpy has
no bfloat16, so on the host a bf16 array is an array of BF16_BITS (its bit patterns, a one-field structured
dtype that no other data has): `to_bf16` rounds float data to it (nearest even, NaN kept), `from_bf16` widens
it to float32 exactly, and `Tensor.numpy()` of a bf16 tensor returns float32.

A dtype argument may be spelled as wgraph names it ("f32"), as numpy does (np.float32, np.dtype("float32"),
"float32", "<f4") or as torch does (torch.float32, read by its name: torch is not imported); `dtype_name_of`
is the one mapping from a spelling to wgraph's name."""

from __future__ import annotations

import warnings

import attrs
import numpy as np

from wgraph.errors import DtypeError, ShapeError


@attrs.frozen
class DType:
    name: str
    numpy: np.dtype  # of the stored elements on the host (BF16_BITS for bf16)
    itemsize: int
    wgsl: str        # the element type a shader's array holds (bf16: u32 words of two elements)
    host: np.dtype   # what reading a tensor back gives (float32 for bf16; else `numpy`)


BF16_BITS = np.dtype([("bf16", "<u2")])

DTYPES = {
    d.name: d
    for d in (
        DType("f32", np.dtype(np.float32), 4, "f32", np.dtype(np.float32)),
        DType("f16", np.dtype(np.float16), 2, "f16", np.dtype(np.float16)),
        DType("bf16", BF16_BITS, 2, "u32", np.dtype(np.float32)),
        DType("u32", np.dtype(np.uint32), 4, "u32", np.dtype(np.uint32)),
        DType("i32", np.dtype(np.int32), 4, "i32", np.dtype(np.int32)),
    )
}

_FROM_NUMPY = {d.numpy: d.name for d in DTYPES.values()}


# Names numpy and torch give wgraph's dtypes (torch's without "torch."); numpy's other spellings ("<f4", "single",
# np.float32) go through np.dtype.
ALIASES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int32": "i32", "uint32": "u32"}

# What to do instead, for the dtypes wgraph does not have (by numpy's / torch's name).
_INSTEAD = {
    "float64": "wgraph computes in f32: pass dtype='f32' (float64 data is converted, checked for overflow) or "
               "convert with x.astype(np.float32)",
    "int64": "wgraph's integers are i32 and u32: pass dtype='i32' (values are checked) or x.astype(np.int32)",
    "int16": "wgraph's integers are i32 and u32: x.astype(np.int32)",
    "uint16": "wgraph's integers are i32 and u32: x.astype(np.uint32)",
    "uint64": "wgraph's integers are i32 and u32: pass dtype='u32' (values are checked) or x.astype(np.uint32)",
    "int8": "8-bit data is stored four to a u32: wgraph.dtypes.pack_bytes_u32(x)",
    "uint8": "8-bit data is stored four to a u32: wgraph.dtypes.pack_bytes_u32(x)",
    "bool": "store flags as u32 (0 or 1): dtype='u32'",
}


def _numpy_dtype(value) -> np.dtype | None:
    """The numpy dtype `value` spells (np.float32, np.dtype("float32"), "<f4", float), or None."""
    if not isinstance(value, (str, np.dtype, type)):
        return None   # np.dtype() would read other objects' .dtype, or take None as float64
    try:
        with warnings.catch_warnings():   # numpy 2 warns on deprecated codes ("a") while it parses them
            warnings.simplefilter("ignore")
            return np.dtype(value)
    except (TypeError, ValueError):
        return None


def _torch_name(value) -> str | None:
    """torch's name of a torch dtype ("float16" for torch.float16), read without importing torch."""
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return str(value).removeprefix("torch.")
    return None


def dtype_name_of(value) -> str | None:
    """wgraph's name of the dtype `value` spells: a wgraph name ("f32"), numpy's (np.float32, np.dtype("float32"),
    "float32", "<f4"), torch's (torch.float32, by name) or "bfloat16"; None when it spells no wgraph dtype."""
    if isinstance(value, str) and type(value) is not str:   # np.str_("f32"), a StrEnum member: by their characters
        value = str.__str__(value)
    if type(value) is str:
        if value in DTYPES:
            return value
        if value in ALIASES:
            return ALIASES[value]
    torch_name = _torch_name(value)
    if torch_name is not None:
        return ALIASES.get(torch_name)
    dt = _numpy_dtype(value)
    return None if dt is None else _FROM_NUMPY.get(dt)   # by equality: ">f4" (big-endian) is not f32


# wgraph-style names of dtypes wgraph lacks, as a user may guess them
_GUESSED = {"f64": "float64", "i64": "int64", "u64": "uint64", "i16": "int16", "u16": "uint16", "i8": "int8",
            "u8": "uint8"}


def numpy_dtype_of(value) -> np.dtype | None:
    """The numpy dtype `value` spells, torch's dtypes read by name (torch.float64 is float64), or None: for host
    arrays whose dtype need not be a wgraph one (rope_tables' float64 tables). wgraph's names mean what they mean
    everywhere else ("f16" is float16, never numpy's 16-byte float128; bf16 is its bit patterns, BF16_BITS), and so
    do the wgraph-style names of dtypes wgraph lacks ("f64" is float64, "u8" uint8, not numpy's uint64)."""
    if type(value) is str:
        if value in DTYPES:
            return DTYPES[value].numpy
        if value in _GUESSED:
            return np.dtype(_GUESSED[value])
    name = _torch_name(value)
    return _numpy_dtype(name if name is not None else value)


def dtype_instead(value) -> str:
    """For a spelling of a dtype wgraph lacks (float64, int8, ...): what to do instead, or ""."""
    name = _GUESSED.get(value) if type(value) is str else _torch_name(value)
    if name is None:
        dt = _numpy_dtype(value)
        name = None if dt is None else dt.name
    return f"{name}: {_INSTEAD[name]}" if name in _INSTEAD else ""


def dtype_info(name: str) -> DType:
    """The DType called `name`; DtypeError naming the choices otherwise."""
    info = DTYPES.get(name) if type(name) is str else None
    if info is None:
        raise DtypeError(f"unknown dtype {name!r}; wgraph has {sorted(DTYPES)}")
    return info


def dtype_of_numpy(dt) -> str:
    """The wgraph dtype name for a numpy dtype that wgraph stores as is."""
    dt = np.dtype(dt)
    if dt not in _FROM_NUMPY:
        if dt.byteorder == ">" and dt.newbyteorder("<") in _FROM_NUMPY:  # the GPU reads little-endian words
            raise DtypeError(f"numpy dtype {dt} is big-endian; wgraph stores little-endian data: convert it with "
                             f"array.astype(array.dtype.newbyteorder('<')) (or pass dtype=)")
        stored = ", ".join(f"{d.name} ({'bfloat16 bit patterns' if d.name == 'bf16' else d.numpy})"
                           for d in DTYPES.values())
        raise DtypeError(f"numpy dtype {dt} has no wgraph dtype; wgraph stores {stored} "
                         "(or pack int8/uint8 data with wgraph.dtypes.pack_bytes_u32)")
    return _FROM_NUMPY[dt]


def pack_bytes_u32(a: np.ndarray) -> np.ndarray:
    """Pack int8/uint8 values four to a little-endian u32 (the last axis padded with zeros to a multiple of 4)."""
    a = np.asarray(a)
    if a.dtype not in (np.int8, np.uint8):
        raise DtypeError(f"pack_bytes_u32 takes int8 or uint8, got {a.dtype}")
    if a.ndim == 0:  # a.shape[-1] raised a bare IndexError ('tuple index out of range')
        raise ShapeError(f"pack_bytes_u32 packs along the last axis; got a 0-d array ({a.item()!r}): pass "
                         f"np.atleast_1d(x)")
    pad = (-a.shape[-1]) % 4
    if pad:
        a = np.concatenate([a, np.zeros(a.shape[:-1] + (pad,), a.dtype)], axis=-1)
    return np.ascontiguousarray(a).view(np.uint32)


F32_MAX = float(np.finfo(np.float32).max)


BF16_MAX = float(np.uint32(0x7F7F0000).view(np.float32))  # the largest finite bfloat16, (2 - 2^-7) * 2^127


def to_bf16(a, *, where: str = "to_bf16") -> np.ndarray:
    """Float data as bfloat16 bit patterns (a BF16_BITS array of a's shape): rounded to nearest, ties to even;
    NaN stays NaN (quiet, sign kept), infinities stay. DtypeError names the first finite value that would
    round to infinity (|x| >= 2^128 - 2^119), and refuses uint16 (bit patterns or numbers? say which)."""
    a = np.asarray(a)
    if a.dtype == BF16_BITS:
        return a
    if a.dtype.kind not in "biuf":
        raise DtypeError(f"{where}: bf16 data must come from real numbers, got an array of {a.dtype}")
    if a.dtype.kind == "u" and a.dtype.itemsize == 2:  # bf16 bits out of torch (x.view(torch.uint16)) or a file
        # look like this: never numbers; big-endian '>u2' too (it was taken as numbers, 0x3F80 becoming 16256.0)
        swapped = a.dtype != np.uint16   # a view of big-endian words would read each pattern byte-swapped
        raise DtypeError(f"{where}: a {'big-endian uint16 (>u2)' if swapped else 'uint16'} array is ambiguous as "
                         f"bf16 data: bfloat16 bit patterns are "
                         f"{'array.astype(np.uint16)' if swapped else 'array'}.view(wgraph.dtypes.BF16_BITS) "
                         f"(from_bf16 reads uint16 so), numbers are array.astype(np.float32)")
    if a.dtype.kind == "f" and a.dtype.itemsize > 4:  # float64, long double: rounded from their own precision
        bits = _bf16_bits_from_f64(a)
    elif a.dtype.kind in "iu" and a.dtype.itemsize > 2:
        bits = _bf16_bits_from_f64(_int_as_f64(a))
    else:  # f32, f16, bool, small ints: exact in f32, rounded once from there
        u = np.ascontiguousarray(a, np.float32).view(np.uint32)
        rounded = ((u.astype(np.uint64) + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        bits = np.where(np.isnan(u.view(np.float32)), ((u >> 16) | 0x40).astype(np.uint16), rounded)
    overflow = np.isinf(_widen(bits)) & np.isfinite(a)
    if overflow.any():
        raise DtypeError(f"{where}: {a[overflow].flat[0].item()!r} is beyond bfloat16's range (largest finite "
                         f"{BF16_MAX:.8g}); it would become inf")
    return np.ascontiguousarray(bits).view(BF16_BITS).reshape(a.shape)


def from_bf16(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (BF16_BITS or uint16) widened to float32, exactly."""
    bits = np.asarray(bits)
    if bits.dtype not in (BF16_BITS, np.dtype(np.uint16)):
        raise DtypeError(f"from_bf16 takes bfloat16 bit patterns (BF16_BITS or uint16), got {bits.dtype}")
    return _widen(np.ascontiguousarray(bits).view(np.uint16)).reshape(bits.shape)


def as_f32(a) -> np.ndarray:
    """Host values as float32: bf16 bit patterns (BF16_BITS) decoded by from_bf16, anything else cast
    (np.asarray(bits, np.float32) of a BF16_BITS array takes the bits as numbers: 1.0, 0x3F80, is 16256.0)."""
    a = np.asarray(a)
    return from_bf16(a) if a.dtype == BF16_BITS else a.astype(np.float32)


def _widen(bits16: np.ndarray) -> np.ndarray:
    return (bits16.astype(np.uint32) << 16).view(np.float32)


def _int_as_f64(a: np.ndarray) -> np.ndarray:
    """Integers as float64 that round to the same bfloat16: exact below 2^53; above, the bits under 2^11 folded
    into a sticky lowest bit (round to odd, far below bf16's rounding point), so 2^53 + 2^45 + 1 does not round
    to the tie 2^53 + 2^45 first."""
    if a.dtype.itemsize <= 4:
        return a.astype(np.float64)  # exact
    neg = a < 0
    m = a.astype(np.uint64)
    with np.errstate(over="ignore"):  # ~0 + 1 wraps to 0 (unused: 0 is not negative); numpy warned of it for 0-d
        m = np.where(neg, ~m + np.uint64(1), m)  # data (dev.tensor(0, "bf16")), whose ufuncs compute as scalars
    sticky = ((m >> np.uint64(11)) | ((m & np.uint64(0x7FF)) != 0)).astype(np.float64) * 2048.0
    mag = np.where(m >= np.uint64(1 << 53), sticky, m.astype(np.float64))
    return np.where(neg, -mag, mag)


def _bf16_bits_from_f64(x: np.ndarray) -> np.ndarray:
    """Round float64 (or long double) straight to bfloat16 (through f32 a value could round twice): to a
    multiple of the bf16 ulp at x's exponent (2^(e - 7), subnormal below 2^-126), ties to even, then take the
    top half of the exact f32 result."""
    finite = np.isfinite(x)
    xf = np.where(finite, x, 0.0)
    _, e = np.frexp(np.abs(xf))  # |x| = m 2^e with m in [0.5, 1): the bf16 ulp is 2^(e - 8)
    ulp = np.ldexp(np.ones_like(xf), np.maximum(e - 8, -133))  # in x's precision (a long double past f64's range)
    # q (near x's dtype's max) and q32 may be inf: to_bf16 names the value; a signalling NaN's cast to f32 (its bits
    # replaced below) warned 'invalid value encountered in cast'
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.round(xf / ulp) * ulp
        q32 = np.where(finite, q, x).astype(np.float32)
    u = q32.view(np.uint32)
    return np.where(np.isnan(x), ((u >> 16) | 0x40), u >> 16).astype(np.uint16)
