"""Uniforms: packing a dict by a shader's WGSL struct, the per-command-list arena, and the cache of small
arenas' buffers by their full bytes."""

from __future__ import annotations

import math
import numbers
import struct as _struct
from collections import OrderedDict

import numpy as np

from wgraph.args import show
from wgraph.errors import LimitError, WgraphError
from wgraph.kernels.wgsl import StructLayout

_SCALAR_CODES = {"u32": "<I", "i32": "<i", "f32": "<f", "f16": "<e"}


def _scalar_of(type_: str) -> tuple[str, int]:
    """(scalar type, element count) of a scalar, vector or array-of-scalar field."""
    if type_ in _SCALAR_CODES:
        return type_, 1
    if type_.startswith("vec"):
        n = int(type_[3])
        inner = type_[5:-1] if "<" in type_ else {"f": "f32", "i": "i32", "u": "u32", "h": "f16"}[type_[4]]
        return inner, n
    raise WgraphError(f"uniform field type {type_} cannot be packed; use scalars or vectors of u32/i32/f32")


def pack_uniforms(layout: StructLayout, values: dict) -> bytes:
    """Pack `values` (field name -> number or sequence) into bytes by `layout`. Unknown or missing fields raise."""
    names = {f.name for f in layout.fields}
    unknown = sorted(set(values) - names)
    missing = sorted(names - set(values))
    if unknown or missing:
        raise WgraphError(
            f"uniforms for struct {layout.name}: unknown fields {unknown}, missing fields {missing}; "
            f"the struct has {[f.name for f in layout.fields]}"
        )
    out = bytearray(layout.size)
    for f in layout.fields:
        scalar, count = _scalar_of(f.type)
        value = values[f.name]
        # a list's items as given: np.ravel((1, True, 2, 3)) made one int array, and the True packed as 1 unrefused
        items = [value] if count == 1 else list(value) if isinstance(value, (list, tuple)) else list(np.ravel(value))
        if len(items) != count:
            raise WgraphError(f"uniform field {layout.name}.{f.name} is {f.type}: needs {count} values, got {len(items)} "
                              f"({show(value)})")
        step = 2 if scalar == "f16" else 4
        for i, item in enumerate(items):
            # int() and float() take a bool, a string ("5", "nan") or None's cousins alike: a uniform is a number
            if isinstance(item, (bool, np.bool_)) or not isinstance(item, numbers.Real):
                raise WgraphError(f"uniform field {layout.name}.{f.name} is {scalar}, got {item!r} "
                                  f"({type(item).__name__}); give a number (int(flag) for a flag)")
            if scalar in ("u32", "i32"):
                if isinstance(item, (float, np.floating)) and not float(item).is_integer():
                    raise WgraphError(f"uniform field {layout.name}.{f.name} is {scalar}, got non-integer {item}")
                lo, hi = (0, 2**32 - 1) if scalar == "u32" else (-(2**31), 2**31 - 1)
                if not lo <= int(item) <= hi:
                    raise WgraphError(f"uniform field {layout.name}.{f.name}={show(item)} is outside {scalar} "
                                      f"[{lo}, {hi}]")
                item = int(item)
            else:
                try:
                    item = float(item)
                except OverflowError:   # a Python int (or Fraction) past every float: float() raised it bare
                    raise LimitError(f"uniform field {layout.name}.{f.name}={show(item)} is outside {scalar}'s "
                                     f"range") from None
                if not math.isfinite(item):  # a NaN or inf scale or eps poisons every output silently
                    raise WgraphError(f"uniform field {layout.name}.{f.name} is {scalar}, got {item}; it must be finite")
            try:
                _struct.pack_into(_SCALAR_CODES[scalar], out, f.offset + i * step, item)
            except (OverflowError, _struct.error):
                raise LimitError(f"uniform field {layout.name}.{f.name}={item} is outside {scalar}'s range") from None
    return bytes(out)


def align_up(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


class UniformArena:
    """All uniforms of one command list in one buffer, each slice at the device's uniform offset alignment.

    With `share`, identical byte strings share one slice; a list that patches uniforms later (a Program)
    gives every dispatch its own. `add` returns where the block lives.
    """

    def __init__(self, alignment: int, share: bool = True):
        self.alignment = alignment
        self.share = share
        self._slices: dict[bytes, int] = {}
        self._data = bytearray()
        self.slices = 0  # slices laid out

    def add(self, data: bytes) -> int:
        if self.share and data in self._slices:
            return self._slices[data]
        offset = align_up(len(self._data), self.alignment)
        self._data.extend(b"\0" * (offset - len(self._data)))
        self._data.extend(data)
        self._slices[data] = offset
        self.slices += 1
        return offset

    @property
    def data(self) -> bytes:
        return bytes(self._data)

    def __len__(self) -> int:
        return len(self._data)


class UniformCache:
    """One uniform buffer per distinct small arena (an immediate op's uniforms), keyed by the full bytes
    (never a hash), least recently used evicted past `capacity`, so a repeated call writes no uniform bytes.
    Eviction hands the buffer to `release`, which defers its destruction until the GPU is done with it."""

    def __init__(self, create, release, capacity: int = 256):
        self._create = create
        self._release = release
        self._capacity = capacity
        self._buffers: OrderedDict[bytes, object] = OrderedDict()

    def get(self, data: bytes):
        buf = self._buffers.get(data)
        if buf is not None:
            self._buffers.move_to_end(data)
            return buf, False
        buf = self._create(data)
        self._buffers[data] = buf
        if len(self._buffers) > self._capacity:
            _, old = self._buffers.popitem(last=False)
            self._release(old)
        return buf, True

    def clear(self):
        for buf in self._buffers.values():
            self._release(buf)
        self._buffers.clear()

    def __len__(self) -> int:
        return len(self._buffers)
