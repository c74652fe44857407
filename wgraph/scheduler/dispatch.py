"""The items a command list holds: a kernel dispatch, a buffer copy and a buffer write. Plain data, built
before any GPU work."""

from __future__ import annotations

import attrs

from wgraph.kernels.registry import Kernel
from wgraph.kernels.wgsl import BindingDecl


class Dispatch:
    """One dispatch of `kernel`: packed uniform bytes, one tensor per storage binding of the kernel (in
    binding order), and either direct workgroup counts or an indirect-args tensor with a byte offset (three
    u32: x, y, z).

    A plain slotted class, not attrs: a recorded op makes one per call (the cost of every call)."""

    __slots__ = ("kernel", "uniforms", "tensors", "workgroups", "indirect", "label")

    def __init__(self, kernel: Kernel, uniforms: bytes, tensors: tuple, workgroups: tuple[int, int, int] | None = None,
                 indirect: tuple[object, int] | None = None, label: str = ""):
        self.kernel = kernel
        self.uniforms = uniforms
        self.tensors = tensors  # a Tensor per kernel.storage_bindings entry
        self.workgroups = workgroups
        self.indirect = indirect
        self.label = label

    @property
    def bindings(self) -> tuple[tuple[BindingDecl, object], ...]:
        """(declaration, Tensor) per storage binding."""
        return tuple(zip(self.kernel.storage_bindings, self.tensors))

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
