"""The one rule for host data going to the GPU (`dev.tensor`, `dev.write`, `Program.run`): anything numpy can
view (an ndarray, the buffer protocol, `__array__`: a memoryview, a torch CPU tensor), of a wgraph dtype as it
is; a dtype conversion only when the caller asks for it (`dtype=`); a 0-d value stays 0-d. Python numbers and
lists take the dtype the call needs, converted as `dtype=` converts: to i32/u32 exactly or refused, to f32/f16/bf16
rounded to nearest even as any float is (0.1; an int past 2^24 in f32: 16777217 -> 16777216), past the range refused.
The float64 refusal is about an array's dtype (data typed wider than wgraph stores), not about exact values."""

from __future__ import annotations

import numpy as np

from wgraph import args
from wgraph.dtypes import BF16_BITS, DTYPES, dtype_info, dtype_of_numpy, from_bf16, to_bf16
from wgraph.errors import DtypeError, LimitError

_STORED = ", ".join(list(DTYPES)[:-1]) + " and " + list(DTYPES)[-1]   # "f32, f16, bf16, u32 and i32"
FLOAT64 = (f"got float64 data; wgraph stores {_STORED} and never narrows silently: convert it explicitly "
           "(dtype='f32' where the call takes dtype=, or array.astype(np.float32))")


def _python_data(value) -> bool:
    """Numbers and lists carry no dtype of their own: they take the dtype the call needs."""
    return isinstance(value, (bool, int, float, list, tuple)) and not isinstance(value, np.generic)


def _holds_bool(value) -> bool:
    """A Python bool, or a list / tuple holding one at any depth (numpy would count True as 1)."""
    if isinstance(value, (bool, np.bool_)):
        return True
    return isinstance(value, (list, tuple)) and any(_holds_bool(v) for v in value)


def _past_64_bits(value) -> int | None:
    """The first Python int in `value` (a number, or lists / tuples of them at any depth) that numpy's int64 and
    uint64 cannot hold (numpy makes such data an array of objects), or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if not -2**63 <= value <= 2**64 - 1 else None
    if isinstance(value, (list, tuple)):
        return next((v for v in map(_past_64_bits, value) if v is not None), None)
    return None


def _int_shown(value: int) -> str:
    """A big int as a message names it: its digits, up to 60 of them (str raises past 4300), else its size."""
    return str(value) if value.bit_length() <= 199 else f"an int of {value.bit_length()} bits"


def host_view(value, where: str, dtype: str | None = None) -> np.ndarray:
    """`value` as a numpy array (a view where numpy can make one), any dtype; DtypeError if numpy cannot.
    dtype: the wgraph dtype the data is for, if known (named in the error for an integer past 64 bits)."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as e:  # torch: bf16, CUDA, requires_grad; ragged lists
        raise DtypeError(f"{where}: cannot view {type(value).__name__} as a numpy array ({e})") from None
    if arr.dtype == object:
        big = _past_64_bits(value) if _python_data(value) else None
        if big is not None:  # dev.tensor([2**64], "u32") said it could not view a list: the value is what is wrong
            if dtype in ("i32", "u32"):
                info = np.iinfo(dtype_info(dtype).numpy)
                raise DtypeError(f"{where}: {_int_shown(big)} is outside {dtype}'s range [{info.min}, {info.max}]")
            raise DtypeError(f"{where}: the Python int {_int_shown(big)} is past numpy's 64-bit integers (numpy would "
                             f"hold it as an object); give it as a float (float(x))")
        if isinstance(value, np.ndarray):  # "cannot view ndarray as a numpy array" said nothing of what was wrong
            raise DtypeError(f"{where}: an array of dtype object (Python objects) has no wgraph dtype; convert it "
                             f"(array.astype(np.float32), or another wgraph dtype)")
        raise DtypeError(f"{where}: cannot view {type(value).__name__} as a numpy array; pass an ndarray, "
                         f"a buffer (memoryview) or an object with __array__ (a CPU torch tensor)")
    return arr


def _convert(arr: np.ndarray, dtype: str, value, where: str) -> np.ndarray:
    if dtype == "bf16":  # numpy has no bfloat16: rounded to its bit patterns (nearest even), overflow refused
        return to_bf16(arr, where=where)
    target = dtype_info(dtype).numpy
    if arr.dtype == BF16_BITS:  # wgraph's own bf16 (its bit patterns): its values, exactly, not 'an array of
        arr = from_bf16(arr)    # [('bf16', '<u2')]' refused as a dtype f32 data cannot come from
    if arr.dtype.kind not in "biuf":  # complex (the imaginary part would be dropped), strings, dates, ...
        raise DtypeError(f"{where}: {dtype} data cannot come from an array of {arr.dtype}")
    if target.kind == "f":  # never to inf silently: a finite value past the dtype's range is named
        # the overflow is found and named just below; a signalling NaN (float64 0x7ff0000000000001) becomes a quiet
        # NaN, as documented, where numpy warns 'invalid value encountered in cast' (an error under -W error)
        with np.errstate(over="ignore", invalid="ignore"):
            out = arr.astype(target)
        bad = np.isinf(out) & np.isfinite(arr)
        if bad.any():
            raise DtypeError(f"{where}: {arr[bad].flat[0].item()!r} is outside {dtype}'s range "
                             f"+-{float(np.finfo(target).max):.8g}")
        return out
    if target.kind in "iu" and arr.size:  # never wrapped, truncated or NaN silently: name the first bad value
        if arr.dtype.kind == "f":
            bad = ~np.isfinite(arr) | (arr != np.trunc(arr))
            if bad.any():
                raise DtypeError(f"{where}: {arr[bad].flat[0].item()!r} is not an integer; a {dtype} tensor "
                                 f"holds integers")
        info = np.iinfo(target)
        # compared as Python numbers (exact): numpy compares a float32 with the int 2^31 - 1 in float32, where it is
        # 2^31, so np.float32(2**31) passed for i32 and wrapped to -2^31 (2^32 for u32 became 0)
        lo, hi = arr.min().item(), arr.max().item()
        if lo < info.min or hi > info.max:
            raise DtypeError(f"{where}: {(lo if lo < info.min else hi)!r} is outside {dtype}'s range "
                             f"[{info.min}, {info.max}]")
    return arr.astype(target)


def host_array(value, dtype: str | None = None, *, convert: bool = False, where: str) -> np.ndarray:
    """`value` as a C-contiguous numpy array of a wgraph dtype, with its shape (0-d included).

    dtype: the wgraph dtype the call needs (None: the value's own). convert: the caller asked for dtype
    (`dtype=`), so an array of another dtype is converted; otherwise it must already be that dtype.
    Python numbers and lists take `dtype` (their values checked for integer dtypes); without one they are
    refused with the call that says which (numpy would make them float64 or int64).
    """
    arr = host_view(value, where, dtype)
    if dtype is None and _python_data(value) and arr.dtype.kind in "biuf":
        # numpy would pick float64 / int64, which wgraph lacks: the caller says which dtype it means (a list of
        # numpy float32 scalars too: numpy makes it float32, but a list is Python data, typed by dtype=)
        guess = "f32" if arr.dtype.kind == "f" else "i32"
        lacks = "" if arr.dtype in (np.float32, np.float16, np.int32, np.uint32) else ", which wgraph lacks"
        raise DtypeError(f"{where}: a Python {type(value).__name__} has no dtype of its own (numpy would make it "
                         f"{arr.dtype}{lacks}); say which with dtype=, as in dev.tensor(x, dtype={guess!r}), "
                         f"or pass np.asarray(x, np.{dtype_info(guess).numpy})")
    if not convert and (arr.dtype.kind == "b" or (_python_data(value) and _holds_bool(value))):
        # True is not the number 1 unless the caller says so (dtype=, or an array of numbers)
        raise DtypeError(f"{where}: got booleans ({args.show(value)}); pass numbers, or convert them explicitly "
                         f"(np.asarray(x, np.uint32), or dtype= where the call takes it)")
    if dtype is not None and (convert or _python_data(value)):
        if arr.dtype != dtype_info(dtype).numpy:
            arr = _convert(arr, dtype, value, where)
    elif arr.dtype == np.float64 and dtype in (None, "f32"):  # for another dtype, the mismatch below names it
        raise DtypeError(f"{where}: {FLOAT64}")
    elif dtype is None:
        try:
            dtype_of_numpy(arr.dtype)
        except DtypeError as e:  # naming the dtypes wgraph stores, and where
            raise DtypeError(f"{where}: {e}") from None
    elif arr.dtype != dtype_info(dtype).numpy:
        target = dtype_info(dtype).numpy
        if dtype == "bf16":
            how = "wgraph.dtypes.to_bf16(array)"
        elif arr.dtype == BF16_BITS:  # array.astype(np.float32) takes its bits as numbers: 1.0 (0x3F80) is 16256.0
            how = "wgraph.dtypes.from_bf16(array)" + ("" if dtype == "f32" else f".astype(np.{target})")
        else:
            how = f"array.astype(np.{target})"
        stored = "bfloat16 bit patterns" if dtype == "bf16" else target   # for bf16 not [('bf16', '<u2')]
        got = "bfloat16 bit patterns (BF16_BITS)" if arr.dtype == BF16_BITS else f"an array of {arr.dtype}"
        if arr.dtype.kind in "SU":   # text: astype would read '3' as the number 3, which nothing here asked for
            raise DtypeError(f"{where}: expects {dtype} ({stored}), got text ({args.show(value)}): pass numbers")
        raise DtypeError(f"{where}: expects {dtype} ({stored}), got {got}; convert it explicitly ({how})")
    return arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)


def host_ids(ids, vocab: int, where: str) -> np.ndarray:
    """Token ids given as an int, ints or a numpy integer array, as u32, checked against a table of `vocab` rows:
    ArgumentError unless integers in [0, 2^32 - 1] (args.ids' rule), LimitError naming the first id >= vocab.
    An int gives one id ([1])."""
    if args.is_int(ids):   # one id: named as given (not as the list it becomes)
        ids = [args.integer(where, "ids", ids)]
    arr = args.ids(where, "ids", ids, ndim=None)
    bad = np.flatnonzero(arr.reshape(-1) >= vocab)
    if bad.size:
        i = int(bad[0])
        raise LimitError(f"{where}: id {int(arr.reshape(-1)[i])} at index {i} is outside the table's {vocab} "
                         f"rows (ids must be in [0, {vocab}))")
    return arr.astype(np.uint32)
