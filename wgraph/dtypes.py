"""The dtype table: the one place that says how each wgraph dtype is stored."""

import attrs
import numpy as np

from wgraph.errors import DtypeError


@attrs.frozen
class DType:
    name: str
    numpy: np.dtype
    itemsize: int
    wgsl: str


DTYPES = {
    d.name: d
    for d in (
        DType("f32", np.dtype(np.float32), 4, "f32"),
        DType("f16", np.dtype(np.float16), 2, "f16"),
        DType("u32", np.dtype(np.uint32), 4, "u32"),
        DType("i32", np.dtype(np.int32), 4, "i32"),
    )
}

_FROM_NUMPY = {d.numpy: d.name for d in DTYPES.values()}


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
        raise DtypeError(
            f"numpy dtype {dt} has no wgraph dtype; use one of {sorted(_FROM_NUMPY, key=str)} "
            "(or pack int8/uint8 data with wgraph.dtypes.pack_bytes_u32)"
        )
    return _FROM_NUMPY[dt]


def pack_bytes_u32(a: np.ndarray) -> np.ndarray:
    """Pack int8/uint8 values four to a little-endian u32 (the last axis padded with zeros to a multiple of 4)."""
    a = np.asarray(a)
    if a.dtype not in (np.int8, np.uint8):
        raise DtypeError(f"pack_bytes_u32 takes int8 or uint8, got {a.dtype}")
    pad = (-a.shape[-1]) % 4
    if pad:
        a = np.concatenate([a, np.zeros(a.shape[:-1] + (pad,), a.dtype)], axis=-1)
    return np.ascontiguousarray(a).view(np.uint32)


F32_MAX = float(np.finfo(np.float32).max)
