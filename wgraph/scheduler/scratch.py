"""`ScratchSpace`: where the scratch tensors of op calls live, for one command list or one Program.

The queue runs a list's calls one after another and a call uses its scratch only between its own dispatches,
so every call of a list can share the same buffers: a call's requests take distinct buffers (largest first),
and buffer j is as large as the largest request any call puts in it. A Program `reserve`s every node's requests
first, so each buffer is made once at its final size; a command list places calls as they come and makes a
larger buffer when a call needs one (earlier calls keep the smaller one they were given)."""

from __future__ import annotations

from wgraph.errors import LimitError
from wgraph.tensor import Tensor


def _need(spec) -> int:
    return -(-max(4, spec.nbytes) // 4) * 4


class ScratchSpace:
    """Scratch of the calls of one list. `specs` are OpTemplate.scratch: ((TensorSpec, label), ...)."""

    def __init__(self, empty, label: str):
        self._empty = empty  # (shape, dtype, label) -> Tensor, from the device's pool
        self.label = label
        self.sizes: list[int] = []  # bytes of buffer j: reserved, or made
        self._buffers: list[Tensor | None] = []
        self._placed: dict[tuple, tuple[Tensor, ...]] = {}  # a call's specs -> its views (calls repeat specs)
        self.requests = 0  # reserved requests, and their bytes had each its own buffer (a Program's memory plan)
        self.naive_bytes = 0

    def reserve(self, specs: tuple) -> None:
        """Size the buffers for a call with these requests before any is made."""
        for j, (spec, _label) in enumerate(sorted(specs, key=lambda s: -s[0].nbytes)):
            need = _need(spec)
            self.requests += 1
            self.naive_bytes += need
            if j == len(self.sizes):
                self.sizes.append(need)
                self._buffers.append(None)
            self.sizes[j] = max(self.sizes[j], need)

    def place(self, specs: tuple, grow: bool = True) -> tuple[Tensor, ...]:
        """A view per request, in the order of `specs`, on the shared buffers. Without `grow` (a compiled
        Program), LimitError where a request needs a buffer larger than reserved."""
        got = self._placed.get(specs)
        if got is not None:
            return got
        views: list = [None] * len(specs)
        for j, i in enumerate(sorted(range(len(specs)), key=lambda i: -specs[i][0].nbytes)):
            spec, label = specs[i]
            buf = self._buffer(j, _need(spec), grow, label)
            views[i] = Tensor(buf.device, buf.buffer, spec, label, base=buf)
        got = self._placed[specs] = tuple(views)
        return got

    def _buffer(self, j: int, need: int, grow: bool, label: str) -> Tensor:
        if j < len(self._buffers):
            buf = self._buffers[j]
            if buf is not None and buf.nbytes >= need:
                return buf
            if buf is None and self.sizes[j] >= need:
                buf = self._buffers[j] = self._empty((self.sizes[j] // 4,), "u32", f"{self.label}.scratch{j}")
                return buf
        if not grow:
            have = self.sizes[j] if j < len(self.sizes) else 0
            raise LimitError(f"{self.label}: scratch {label} needs {need} bytes in shared buffer {j}, which holds "
                             f"{have}")
        if j == len(self._buffers):
            self._buffers.append(None)
            self.sizes.append(0)
        self.sizes[j] = max(self.sizes[j], need)
        buf = self._buffers[j] = self._empty((self.sizes[j] // 4,), "u32", f"{self.label}.scratch{j}")
        return buf

    @property
    def buffers(self) -> int:
        return len(self.sizes)

    @property
    def nbytes(self) -> int:
        return sum(self.sizes)
