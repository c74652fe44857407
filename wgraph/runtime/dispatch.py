"""The items a command list holds: a kernel dispatch, a buffer copy and a buffer write. Plain data, built
before any GPU work."""

from __future__ import annotations

import attrs

from wgraph.runtime.registry import Kernel
from wgraph.runtime.wgsl import BindingDecl


class Dispatch:
    """One dispatch of `kernel`: packed uniform bytes, tensors per storage binding, and either direct
    workgroup counts or an indirect-args tensor with a byte offset (three u32: x, y, z).

    A plain slotted class, not attrs: recorded ops make one per call, and its tensors are read three times
    (device check, bind group, aliasing), so they are gathered once here. `bindings` None with `tensors`
    given: the kernel's storage bindings in order, paired with `tensors` only when read (an op template's
    dispatch; the encode path reads only `tensors`)."""

    __slots__ = ("kernel", "uniforms", "_bindings", "workgroups", "indirect", "label", "tensors")

    def __init__(self, kernel: Kernel, uniforms: bytes, bindings: tuple[tuple[BindingDecl, object], ...] | None,
                 workgroups: tuple[int, int, int] | None = None, indirect: tuple[object, int] | None = None,
                 label: str = "", tensors: tuple | None = None):
        self.kernel = kernel
        self.uniforms = uniforms
        self._bindings = bindings  # (declaration, Tensor) in binding order
        self.workgroups = workgroups
        self.indirect = indirect
        self.label = label
        self.tensors = tensors if tensors is not None else tuple([t for _, t in bindings])  # given: the same

    @property
    def bindings(self) -> tuple[tuple[BindingDecl, object], ...]:
        if self._bindings is None:
            self._bindings = tuple(zip(self.kernel.storage_bindings, self.tensors))
        return self._bindings

    def replace(self, **changes) -> Dispatch:
        """A copy with some fields replaced."""
        fields = {"kernel": self.kernel, "uniforms": self.uniforms, "bindings": self.bindings,
                  "workgroups": self.workgroups, "indirect": self.indirect, "label": self.label}
        return Dispatch(**{**fields, **changes})

    def writes(self) -> tuple:
        return tuple(t for b, t in self.bindings if b.writes)

    def __repr__(self) -> str:
        return f"Dispatch({self.kernel.name}, {self.label!r}, workgroups={self.workgroups}, indirect={self.indirect})"


@attrs.frozen(eq=False)
class Copy:
    """Copy `nbytes` from one tensor's buffer to another's (ends a compute pass)."""

    src: object
    dst: object
    nbytes: int
    src_offset: int = 0
    dst_offset: int = 0
    label: str = "copy"

    @property
    def tensors(self) -> tuple:
        return (self.src, self.dst)

    def writes(self) -> tuple:
        return (self.dst,)


@attrs.frozen(eq=False)
class Write:
    """Host bytes into a tensor, in order with the items around it (`dev.write` inside a recording).
    `data` is padded to a multiple of 4 bytes."""

    dst: object
    data: bytes
    label: str = "write"

    @property
    def tensors(self) -> tuple:
        return (self.dst,)

    def writes(self) -> tuple:
        return (self.dst,)
