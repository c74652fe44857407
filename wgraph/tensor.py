"""Tensors: a GPU buffer with a shape, a dtype and a label; TensorSpec is the same without a buffer."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NoReturn

import attrs
import numpy as np

from wgraph import args
from wgraph.dtypes import dtype_info
from wgraph.errors import DtypeError, ShapeError

if TYPE_CHECKING:
    from wgraph.device import Device


def _shape(value) -> tuple[int, ...]:
    """A shape by args.shape's rule (a tuple of plain ints answers first: every new tensor's spec comes here)."""
    return args.shape("TensorSpec", "shape", value)


def _dtype(value) -> str:
    """A dtype by args.dtype_name's rule (wgraph's name answers first): TensorSpec((2,), np.float32) was refused as
    "unknown dtype <class 'numpy.float32'>" where every call takes numpy's and torch's spellings."""
    return args.dtype_name("TensorSpec", "dtype", value)


@attrs.frozen
class TensorSpec:
    """Shape and dtype of a value, with no storage: what `infer` functions take and return."""

    shape: tuple[int, ...] = attrs.field(converter=_shape)
    dtype: str = attrs.field(converter=_dtype)

    @property
    def size(self) -> int:
        """The number of elements (the product of the shape; 1 for a 0-d shape)."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """The bytes of the elements: size times the dtype's item size."""
        return self.size * dtype_info(self.dtype).itemsize

    @property
    def is_u32_scalar(self) -> bool:
        """A u32 of exactly one value: the one rule for a GPU kv_len, position or step (a kernel reads [0])."""
        return self.dtype == "u32" and self.size == 1

    def check_u32_scalar(self, message: str) -> None:
        """Raise `message` unless is_u32_scalar (require's classes)."""
        require(self, "u32", self.is_u32_scalar, message)


def require(spec: TensorSpec | None, dtype: str, shape_ok: bool, message: str) -> None:
    """Raise `message` unless `spec` is there, of `dtype`, and `shape_ok`: a DtypeError for another dtype (as for
    every tensor argument: a bf16 or f32 kv_len, position or page table was a ShapeError), a ShapeError for a
    missing tensor or its shape."""
    if spec is None or (spec.dtype == dtype and not shape_ok):
        raise ShapeError(message)
    if spec.dtype != dtype:
        raise DtypeError(message)


class Tensor:
    """A GPU tensor. Its buffer goes back to the device's pool when the last reference (views included) dies.
    Made by dev.tensor, dev.empty and the ops, never directly; shape, dtype (a wgraph dtype name), label, spec
    (shape and dtype) and nbytes are read-only facts.

    device: the Device that owns the buffer. buffer: the wgpu buffer. spec: its shape and dtype. label: its name.
    base: the tensor whose buffer a view shares (None for an owner)."""

    __slots__ = ("device", "buffer", "shape", "dtype", "label", "spec", "nbytes", "_base", "_poison", "__weakref__")

    def __init__(self, device: Device, buffer: Any, spec: TensorSpec, label: str = "", base: Tensor | None = None):
        self.device = device
        self.buffer = buffer
        self._base = base  # a view keeps the tensor that owns the buffer alive
        self.spec = spec  # shape and dtype never change: every op call reads them, so they are computed once
        self.shape = spec.shape
        self.dtype = spec.dtype
        self.nbytes = spec.nbytes
        self.label = label
        self._poison: str | None = None

    def __del__(self):
        # The buffer goes back to the pool when the tensor dies (a view's, with the tensor it views). __del__,
        # not weakref.finalize: ~0.8 µs less per tensor, and an op's scratch and outputs are a tensor each.
        if self._base is None:
            self.device.pool.release(self.buffer)

    @property
    def poisoned(self) -> str | None:
        """Why this tensor (or the one whose buffer it views) must not be used, or None."""
        return self._poison if self._base is None else self._base._poison

    def poison(self, reason: str) -> None:
        """Mark the tensor unusable (its recording was discarded): every later use raises with `reason`.

        reason: why, as the later error says it."""
        reason = args.text("Tensor.poison", "reason", reason)
        # counted with the mark under the device lock, which a Program's replay holds while it compares the count
        # with the one it last checked its tensors at (graph/program.py): `+= 1` from two threads at once could
        # lose a count, or take it back to a value a replay had already seen
        with self.device.lock:
            self._owner._poison = reason
            self.device._poisons += 1

    @property
    def size(self) -> int:
        """The number of elements (the product of the shape; 1 for a 0-d shape)."""
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        """The number of dimensions (len(shape))."""
        return len(self.shape)

    @property
    def ends_mid_word(self) -> bool:
        """Whether this is a view whose last 4-byte word also holds bytes of its buffer past it (an odd number of
        16-bit elements inside a larger tensor): a write in whole words (a queue write, a copy) would overwrite them."""
        return self._base is not None and self.nbytes % 4 != 0 and self._base.nbytes > self.nbytes

    def numpy(self) -> np.ndarray:
        """Download to a numpy array (waits for the GPU work that writes it). A bf16 tensor comes back as float32
        (numpy has no bfloat16; the widening is exact)."""
        return self.device.read(self)

    def __array__(self, dtype: Any = None, copy: Any = None) -> NoReturn:
        """numpy cannot view GPU memory: without this, np.asarray(t) was an array of one object and
        np.allclose(t, ref) failed on '-'. The readback is t.numpy()."""
        raise DtypeError(f"{self!r} lives on the GPU, where numpy cannot see it: read it with .numpy() "
                         f"(it waits for the GPU work that writes it), as in np.asarray(t.numpy())")

    def reshape(self, *shape: int | tuple[int, ...] | list[int]) -> Tensor:
        """A view with another shape over the same buffer (no copy).

        shape: the new shape, as integers or one tuple; one dimension may be -1 (inferred)."""
        shape = args.view_shape("Tensor.reshape", "shape",
                                shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            if known == 0 or self.size % known:
                raise ShapeError(f"Tensor.reshape: cannot view {self.shape} ({self.size} elements) as shape={shape}")
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        spec = TensorSpec(shape, self.dtype)
        if spec.size != self.size:
            raise ShapeError(f"Tensor.reshape: cannot view {self.shape} ({self.size} elements) as "
                             f"shape={spec.shape} ({spec.size})")
        return self._view(spec)

    def prefix(self, rows: int) -> Tensor:
        """A view of the first `rows` entries along the first dimension, over the same buffer (no copy): an op
        given it binds those bytes only (a KV cache's first rows, for a program planned for fewer keys).

        rows: in [1, shape[0]]."""
        if self.ndim == 0:
            raise ShapeError("Tensor.prefix: a 0-dimensional tensor has no rows")
        if self.shape[0] == 0:   # [1, 0] is no range: say why no rows= can do
            raise ShapeError(f"Tensor.prefix(rows={args.show(rows)}): the tensor of shape {self.shape} has no rows "
                             f"(its first dim is 0), so no prefix of 1 row or more")
        rows = args.integer("Tensor.prefix", "rows", rows, 1, self.shape[0])
        return self._view(TensorSpec((rows, *self.shape[1:]), self.dtype))

    def __copy__(self) -> Tensor:
        """copy.copy(t): another handle on the same buffer (a view of all of it), as t.reshape(t.shape) is. The
        default copy duplicated the slots, _base None included: a second owner, so the buffer went back to the pool
        twice and two later tensors were given it (writing one changed the other)."""
        return self._view(self.spec)

    def __deepcopy__(self, memo: dict) -> NoReturn:
        """copy.deepcopy(t) would copy the data, which lives on the GPU: refused (it raised cffi's TypeError)."""
        raise DtypeError(f"copy.deepcopy of {self!r}: its data lives on the GPU, where Python cannot copy it; "
                         f"copy.copy(t) is another handle on the same buffer, dev.tensor(t.numpy(), "
                         f"dtype=t.dtype) a copy of the data")

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        """Pickling a tensor would need its data, which lives on the GPU: refused, saying what to pickle instead."""
        raise DtypeError(f"pickling {self!r}: its data lives on the GPU, where Python cannot read it; pickle "
                         f"t.numpy() (and upload it again with dev.tensor)")

    @property
    def _owner(self) -> Tensor:
        """The tensor that owns the buffer: the one this view views, else itself."""
        return self if self._base is None else self._base

    def _view(self, spec: TensorSpec) -> Tensor:
        """A tensor of `spec` over this one's buffer from its start, keeping the buffer's owner alive."""
        return Tensor(self.device, self.buffer, spec, self.label, base=self._owner)

    def __repr__(self) -> str:
        label = f" {self.label!r}" if self.label else ""
        return f"Tensor{label}(shape={self.shape}, dtype={self.dtype}, nbytes={self.nbytes})"


# What Python asks of a Tensor itself that only its data could answer, with what to do instead: the data lives on the
# GPU. The truth value was object's default, True, so `if t:` and `assert t` tested nothing; the rest raised Python's
# bare TypeError ("unsupported operand type(s) for +"), which named neither wgraph's ops nor .numpy(). == and != stay
# identity (object's), as dicts and sets of tensors need.
_READ_FIRST = "read the data first (t.numpy())"
_MATH = ("wgraph's math is its ops, not operators (wg.ops.add(t, u), wg.ops.mul(t, u), wg.ops.scale(t, factor)), "
         "or compute on the host with t.numpy()")
_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
              "matmul": "@"}
_HOST_USES = {
    "__bool__": ("the truth value (bool, if, assert, and/or) of",
                 "read the data first (t.numpy().any()), or test that a tensor was given with t is not None"),
    **{f"__{r}{name}__": (f"the {op} operator on", _MATH) for name, op in _OPERATORS.items() for r in ("", "r")},
    "__neg__": ("the unary - operator on", _MATH),
    "__pos__": ("the unary + operator on", _MATH),
    "__abs__": ("abs() of", _MATH),
    **{f"__{name}__": (f"the {op} comparison of", _READ_FIRST)
       for name, op in {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}.items()},
    "__len__": ("len() of", "its length is t.shape[0] (t.size counts every element)"),
    "__iter__": ("iterating over", _READ_FIRST),
    "__contains__": ("the in operator on", _READ_FIRST),  # else `x in t` reports __iter__'s error as "not iterable"
    "__getitem__": ("indexing (t[...]) of", "read the data first (t.numpy()[...]); t.reshape() and t.prefix(rows) "
                                           "are views on the GPU"),
    "__setitem__": ("item assignment (t[...] = x) to", "write the whole tensor with dev.write(t, data)"),
    "__float__": ("float() of", "read the data first (t.numpy().item() for one value)"),
    "__int__": ("int() of", "read the data first (t.numpy().item() for one value)"),
}


def _refusal(name: str, use: str, instead: str):
    """Tensor's method `name`, which Python calls for `use` (with any operands): a DtypeError, so a TypeError as
    Python's own for a use a type does not support, naming the tensor and what to do `instead`."""
    def refuse(self, *_operands):
        raise DtypeError(f"{use} {self!r}: its data lives on the GPU, where Python cannot read it; {instead}")

    refuse.__name__, refuse.__qualname__ = name, f"Tensor.{name}"
    refuse.__doc__ = f"Raises DtypeError: {use} a Tensor needs its data, which lives on the GPU."
    return refuse


# set after the class, not in it: a type checker still reports `t + 1` and `t[0]` (a Tensor offers neither)
for _name, (_use, _instead) in _HOST_USES.items():
    setattr(Tensor, _name, _refusal(_name, _use, _instead))
