"""The buffer pool of one device epoch: GPU buffers made in size classes, reused when their tensor dies,
destroyed late.

Reuse is safe as soon as a buffer is released: every use of it that the GPU has not finished yet was
submitted to the queue earlier than anything a new owner will submit, and WebGPU executes one queue's
work in order. What must wait for the GPU is destruction: a released buffer beyond the pool's budget is
destroyed only once the submissions made before its release are done (the scheduler says which are:
`submitted` and `collect`).
"""

from __future__ import annotations

from collections import defaultdict, deque

import wgpu

from wgraph.errors import LimitError

TENSOR_USAGE = (
    wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.INDIRECT
)
UNIFORM_USAGE = wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
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
    """Free buffers by (size class, usage), for one wgpu device of epoch `epoch`. Buffers it makes carry the
    epoch (`_wgraph_epoch`), so a buffer of an older epoch is never pooled or bound again. `forget(buf)` runs
    before a buffer is destroyed (the bind group cache drops what binds it). Call with the device lock held,
    except `release`, which takes it."""

    def __init__(self, gpu, epoch: int, lock, stats, forget, budget_bytes: int = 256 << 20,
                 deferred_budget_bytes: int = 64 << 20, max_bytes: int | None = None,
                 orphans: deque | None = None):
        self._gpu = gpu
        self.epoch = epoch
        # the device's max-buffer-size in whole words: no size class rounds past it (an adapter's limit need not be
        # a power of two: 1,000,000 bytes asked for a 1,048,576-byte buffer, a validation error for a legal tensor)
        self.max_bytes = None if max_bytes is None else max_bytes // 4 * 4
        self._lock = lock  # release() comes from tensor finalizers on any thread
        self._stats = stats
        self._forget = forget
        self.budget_bytes = budget_bytes
        # Past this many bytes waiting for destruction, the next tensor allocation waits for the GPU
        # (Device.empty), else memory grows while a program never reads anything back.
        self.deferred_budget_bytes = deferred_budget_bytes
        self.closed = False  # the device was destroyed: its buffers went with it
        self.submitted = 0  # index of the queue's latest submission (set by the scheduler)
        self._free: dict[tuple[int, int], list] = defaultdict(list)
        self._free_bytes = 0
        self._doomed: list[tuple[int, object]] = []  # (submission index at release, buffer) to destroy later
        self.deferred_bytes = 0  # bytes of the doomed buffers
        # Buffers released while another thread held the lock: a finalizer must never wait for it (the holder may
        # be waiting for this thread: compile workers run the garbage collector too). Taken in under the lock.
        # One deque for all of a device's pools (`orphans`): a buffer released into a pool after its clear() (by
        # a thread that found the lock held by dev.destroy / dev.recreate) was never taken in, as no one calls a
        # cleared pool again, and stats.live_buffers stayed one too high for good. The device's current pool
        # takes such a buffer in at its next call and counts it destroyed (its epoch is an older one).
        self._orphans: deque = deque() if orphans is None else orphans

    def acquire(self, nbytes: int, usage: int):
        self._take_orphans()
        size = size_class(nbytes)
        if self.max_bytes is not None and size > self.max_bytes:
            size = self.max_bytes
        key = (size, usage)
        free = self._free.get(key)
        while free:
            self._free_bytes -= key[0]
            buf = free.pop()
            if buf._internal is not None:
                return buf
            self._stats.buffers_destroyed += 1  # finalized by the garbage collector while pooled (see _release)
        self._stats.buffers_created += 1
        try:
            buf = self._gpu.create_buffer(size=key[0], usage=usage, label="wgraph")
        except wgpu.GPUError as e:   # out of memory, above all: a wgraph error that names the size
            self._stats.buffers_created -= 1
            raise LimitError(f"the device could not make a buffer of {key[0]} bytes ({self._stats.live_buffers} "
                             f"live): {e}") from None
        buf._wgraph_epoch = self.epoch
        return buf

    def release(self, buffer, usage: int = TENSOR_USAGE):
        """A tensor (or a uniform arena) is done with `buffer`: back to the free list, or past the budget
        queued for destruction once the submissions made so far are done. Never blocks: while another thread
        holds the lock, the buffer waits in `_orphans` for the next acquire, release or collect."""
        if not self._lock.acquire(blocking=False):
            self._orphans.append((buffer, usage))   # deque.append: atomic, no lock
            self.take_orphans(blocking=False)      # the holder may have let go between the try and the append
            return
        try:
            self._take_orphans()
            self._release(buffer, usage)
        finally:
            self._lock.release()

    def take_orphans(self, blocking: bool = True) -> None:
        """Take in the buffers released while the lock was held (dev.destroy / dev.recreate call it after letting
        go of the lock, which a release during them found held). Call without the lock held."""
        if self._orphans and self._lock.acquire(blocking=blocking):
            try:
                self._take_orphans()
            finally:
                self._lock.release()

    def _take_orphans(self) -> None:
        # bounded: a pool re-created since this one (a newer epoch) owns its own buffers in the shared deque
        for _ in range(len(self._orphans)):
            try:
                buffer, usage = self._orphans.popleft()
            except IndexError:   # another pool of the device took it in
                return
            if getattr(buffer, "_wgraph_epoch", -1) > self.epoch:
                self._orphans.append((buffer, usage))   # a newer pool's: it takes it in at its next call
            else:
                self._release(buffer, usage)

    def _release(self, buffer, usage: int):
        # A tensor and its buffer that become garbage together in a reference cycle (an exception's traceback
        # holding the frames of an op call) are finalized in any order: wgpu-py's buffer finalizer may already
        # have released the native buffer (`_internal` None), or may release it after it is pooled (acquire
        # skips it then). Neither may be handed out again.
        if self.closed or buffer._internal is None or getattr(buffer, "_wgraph_epoch", None) != self.epoch:
            self._stats.buffers_destroyed += 1  # its device is gone, or wgpu-py released it: it is destroyed
            return
        size = buffer.size
        if self._free_bytes + size > self.budget_bytes:
            self._doomed.append((self.submitted, buffer))
            self.deferred_bytes += size
            return
        self._free[(size, usage)].append(buffer)
        self._free_bytes += size

    def collect(self, completed: int):
        """Destroy doomed buffers whose last possible use (a submission up to `completed`) is done on the GPU."""
        self._take_orphans()
        keep = []
        for index, buf in self._doomed:
            if index <= completed:
                self.deferred_bytes -= buf.size
                self._destroy(buf)
            else:
                keep.append((index, buf))
        self._doomed = keep

    def _destroy(self, buf):
        self._forget(buf)
        self._stats.buffers_destroyed += 1
        if not self.closed and buf._internal is not None:
            buf.destroy()

    def clear(self):
        """The device is destroyed: every pooled and doomed buffer counts as destroyed with it."""
        self.closed = True
        for bufs in self._free.values():
            for buf in bufs:
                self._destroy(buf)
        self._free.clear()
        self._free_bytes = 0
        for _, buf in self._doomed:
            self._destroy(buf)
        self._doomed = []
        self.deferred_bytes = 0
        self._take_orphans()   # released while another thread held the lock: destroyed with the rest (closed)

    @property
    def free_count(self) -> int:
        return sum(len(v) for v in self._free.values())
