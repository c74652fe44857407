"""The buffer pool: GPU buffers in size classes, reused when their tensor dies, destroyed late.

Reuse is safe as soon as a buffer is released: every use of it that the GPU has not finished yet was
submitted to the queue earlier than anything a new owner will submit, and WebGPU executes one queue's
work in order. What must wait for the GPU is destruction: a released buffer beyond the pool's budget is
destroyed only once the device has seen the submissions before its release complete.
"""

from __future__ import annotations

from collections import defaultdict

MIN_BUFFER_BYTES = 16


def size_class(nbytes: int) -> int:
    """Round up to 4 steps per power of two (at most 25% waste), at least MIN_BUFFER_BYTES."""
    n = max(int(nbytes), MIN_BUFFER_BYTES)
    if n <= 256:
        return -(-n // 16) * 16
    top = 1 << (n - 1).bit_length()
    step = top // 8
    return -(-n // step) * step


class BufferPool:
    """Free buffers by (size class, usage). `create(size, usage)` makes a new buffer; `destroy(buf)` ends one."""

    def __init__(self, create, destroy, budget_bytes: int = 256 << 20):
        self._create = create
        self._destroy = destroy
        self.budget_bytes = budget_bytes
        self._free: dict[tuple[int, int], list] = defaultdict(list)
        self._free_bytes = 0
        self._doomed: list[tuple[int, object]] = []  # (serial at release, buffer) waiting to be destroyed
        self.deferred_bytes = 0  # bytes of the doomed buffers

    def acquire(self, nbytes: int, usage: int):
        key = (size_class(nbytes), usage)
        free = self._free.get(key)
        if free:
            self._free_bytes -= key[0]
            return free.pop()
        return self._create(key[0], usage)

    def release(self, buffer, usage: int, serial: int):
        """Take a buffer back; past the budget it is queued for destruction after `serial` completes."""
        size = buffer.size
        if self._free_bytes + size > self.budget_bytes:
            self._doomed.append((serial, buffer))
            self.deferred_bytes += size
            return
        self._free[(size, usage)].append(buffer)
        self._free_bytes += size

    def collect(self, completed_serial: int):
        """Destroy doomed buffers whose last possible use has completed on the GPU."""
        keep = []
        for serial, buf in self._doomed:
            if serial <= completed_serial:
                self.deferred_bytes -= buf.size
                self._destroy(buf)
            else:
                keep.append((serial, buf))
        self._doomed = keep

    def clear(self):
        for bufs in self._free.values():
            for buf in bufs:
                self._destroy(buf)
        self._free.clear()
        self._free_bytes = 0
        for _, buf in self._doomed:
            self._destroy(buf)
        self._doomed = []
        self.deferred_bytes = 0

    @property
    def free_count(self) -> int:
        return sum(len(v) for v in self._free.values())
