"""`Scheduler`: when work reaches one device epoch's GPU queue. It holds the pending list of immediate ops and
its flush policy, the recording open on each thread, the one ordered path of queue writes and submits,
submission indices (fences) and waits, and drives the pool's deferred destruction from them.

Order is the whole rule: the queue applies a `write_buffer` before the next submit, so a write (or a submit)
made while immediate ops wait in the pending list would overtake them. `write_buffer` and `submit` flush the
pending list first; nothing else in wgraph writes to or submits on the queue (tests/test_layout.py; the host
bench's raw-wgpu floor aside)."""

from __future__ import annotations

import threading

import attrs

from wgraph.args import show
from wgraph.errors import ArgumentError, DeviceError, RecordingError, ShapeError
from wgraph.kernels.uniforms import UniformCache
from wgraph.scheduler.commands import CommandList
from wgraph.scheduler.dispatch import Copy, Dispatch, Write
from wgraph.tensor import Tensor
from wgraph.scheduler.fence import submit_for_index, wait_for_index
from wgraph.scheduler.pool import UNIFORM_USAGE

# Immediate ops wait in the pending command list and go to the GPU in one submit when a result is read,
# before any other submission or queue write, on dev.flush(), or when this many items wait (so a long loop of
# immediate ops keeps the GPU busy while the host encodes the next ones).
PENDING_ITEMS = 32
CACHED_UNIFORM_BYTES = 512  # one-slice arenas up to this size get a buffer per distinct content (uniform_buffer)


@attrs.frozen
class UniformBuffer:
    """A uniform buffer lent to a command list; `release()` gives it back (a no-op for a cached one)."""

    buffer: object
    _release: object = None

    def release(self):
        if self._release is not None:
            self._release(self.buffer)


class Scheduler:
    """The submission side of one device epoch. Everything it needs is given here: the wgpu device (queue and
    command encoders), the device lock, the counters, the buffer pool, the pipeline and bind group caches,
    `empty(shape, dtype, label)` for scratch and staging tensors (at most `max_tensor_bytes` each: the device's
    storage binding limit), and the uniform offset alignment."""

    def __init__(self, *, gpu, epoch: int, name: str, lock, stats, pool, pipelines, bind_groups, empty,
                 max_tensor_bytes: int, uniform_alignment: int, recordings: threading.local | None = None):
        self.gpu = gpu
        self.epoch = epoch
        self.name = name  # the adapter, for error messages
        self.lock = lock
        self.stats = stats
        self.pool = pool
        self.pipelines = pipelines
        self.bind_groups = bind_groups
        self.empty = empty
        self.max_tensor_bytes = max_tensor_bytes
        self.uniform_alignment = uniform_alignment
        self.closed = False
        self.last_index = 0  # wgpu-native's index of the latest submission: fences and deferred destruction
        self._pending: CommandList | None = None
        # True while an op call is being appended to the pending list (lock held): its scratch allocation must
        # not wait for the GPU then, which would submit the list half-appended and drop the rest of the call
        self.appending = False
        self.owned: set[int] = set()   # ids of the device's own buffers (error flag, fallbacks): never poisoned
        # each thread's open recordings; a re-created device's scheduler takes the old one's, so a recording open
        # across dev.recreate() on another thread is still found there, and refused (open_recording), rather than
        # that thread's next op calls running at once on the new device
        self._local = recordings if recordings is not None else threading.local()
        self.uniforms = UniformCache(self._new_uniform, self._release_uniform)

    def close(self) -> None:
        """The device is being destroyed: pending work dies with it, cached uniform buffers go back."""
        self._pending = None
        self.uniforms.clear()
        self.closed = True

    def check_open(self) -> None:
        if self.closed:
            raise DeviceError(f"device {self.name!r} (epoch {self.epoch}) is lost or destroyed; call dev.recreate()")

    def check_current(self, *groups) -> None:
        """DeviceError unless this scheduler is open and every tensor of `groups` (sequences of tensors, None
        skipped) is of its epoch. Lock held.
        Callers checked their tensors before they took the lock (an allocation may have waited for it): a
        dev.recreate() on another thread in between must not queue old buffers on the new device, where the next
        flush, on whatever thread, would fail and make every pending op of every thread unusable."""
        self.check_open()
        epoch = self.epoch
        for tensors in groups:
            for t in tensors:
                if t is not None and getattr(t.buffer, "_wgraph_epoch", None) != epoch:
                    raise DeviceError(f"{t!r} was made before the device was re-created (epoch changed)")

    # ---- recordings: the open one of each thread ----

    @property
    def recording(self):
        """The recording open on this thread, if any."""
        stack = getattr(self._local, "stack", None)
        return stack[-1] if stack else None

    @property
    def recordings(self) -> threading.local:
        """Each thread's open recordings (a stack of at most one), handed on to the next epoch's scheduler."""
        return self._local

    def open_recording(self):
        """The recording this thread's op call, run or write joins, if any; DeviceError when it was opened on an
        earlier epoch (another thread re-created the device since: what it recorded died with the old one)."""
        rec = self.recording
        if rec is not None and rec.scheduler is not self:
            raise DeviceError(f"{rec.label} was opened on epoch {rec.scheduler.epoch}, which dev.recreate() replaced "
                              f"(the device is now epoch {self.epoch}): its ops died with the old device; leave its "
                              f"`with dev.record()` block (an exception discards it) and record again")
        return rec

    def push_recording(self, rec) -> None:
        stack = self._local.__dict__.setdefault("stack", [])
        if stack:
            raise RecordingError("a recording is already open on this thread; nested recordings are not supported")
        stack.append(rec)

    def pop_recording(self, rec) -> None:
        stack = self._local.__dict__.get("stack", [])
        if stack and stack[-1] is rec:
            stack.pop()

    # ---- op calls: the open recording, else the pending list ----

    def launch(self, template, inputs, outputs, made=()) -> None:
        """An op call, as its template filled with the call's tensors (CommandList.call): into the recording
        open on this thread (which remembers `made`, the outputs it returns), else the pending list."""
        rec = self.open_recording()
        if rec is not None:
            rec.call(template, inputs, outputs, made)
            return
        with self.lock:
            self.check_current(inputs, outputs)
            pending = self._pending or self._start_pending()
            self.appending = True
            try:
                pending.call(template, inputs, outputs)
            finally:
                self.appending = False
            if len(pending.items) >= PENDING_ITEMS:
                self.flush()

    def run(self, items, outputs=()) -> None:
        """Captured items (Dispatch, Copy, Write) into the open recording, else the pending list."""
        rec = self.open_recording()
        if rec is not None:
            # now, not at its submit: the submit takes the pending ops of every thread in front of the recording,
            # and a failed one would leave them unusable (another thread's valid op, for this call's stale items)
            self.check_captured(items, outputs)
            rec.extend(items)
            if outputs:
                rec.made(outputs)
            return
        with self.lock:
            self.check_captured(items, outputs)  # now, not at the flush: the error belongs to this call
            pending = self._pending or self._start_pending()
            pending.extend(items)
            if len(pending.items) >= PENDING_ITEMS:
                self.flush()

    def check_captured(self, items, outputs=()) -> None:
        """`dev.run`'s items, every tensor of each: a live Tensor of this device in its current epoch, not unusable
        (poisoned: its recording was discarded, or the submit that writes it failed). An op call's tensors were
        checked when it was made; captured items come back any time later, and only their first tensor was
        checked: a tensor of another device further on failed in wgpu at the flush (a GPUValidationError that made
        every pending op unusable), and a poisoned one was bound silently (its never-written bytes read)."""
        fn = "dev.run"
        if isinstance(items, (Dispatch, Copy, Write)) or not isinstance(items, (list, tuple)):
            raise ArgumentError(f"{fn}: items={show(items)} must be a list of captured items (Dispatch, Copy, "
                                f"Write), as list(rec.items) of a recording")
        if not isinstance(outputs, (list, tuple)):
            raise ArgumentError(f"{fn}: outputs={show(outputs)} must be a tuple of the Tensors the items write")
        for i, item in enumerate(items):
            if isinstance(item, Dispatch):
                bindings = item.kernel.storage_bindings
                if len(item.tensors) != len(bindings):
                    raise ShapeError(f"{fn}: items[{i}] ({item.label}) holds {len(item.tensors)} tensors; kernel "
                                     f"{item.kernel.name} has {len(bindings)} storage bindings")
                named = [(b.name, t) for b, t in zip(bindings, item.tensors)]
                if item.indirect is not None:
                    named.append(("indirect", item.indirect[0]))
            elif isinstance(item, Copy):
                named = [("src", item.src), ("dst", item.dst)]
            elif isinstance(item, Write):
                named = [("dst", item.dst)]
            else:
                raise ArgumentError(f"{fn}: items[{i}]={show(item)} is not a captured item (Dispatch, Copy, Write)")
            for name, t in named:
                self._check_captured_tensor(f"{fn}: items[{i}] ({item.label}), {name}", t)
        for j, t in enumerate(outputs):
            self._check_captured_tensor(f"{fn}: outputs[{j}]", t)

    def _check_captured_tensor(self, where: str, t) -> None:
        if not isinstance(t, Tensor):
            raise ShapeError(f"{where}: {show(t)} is not a wgraph Tensor")
        if t.device.scheduler is not self:   # a re-created device's scheduler is its new one: this one
            raise DeviceError(f"{where}: {t!r} belongs to another device ({t.device.caps.adapter_name!r}, epoch "
                              f"{getattr(t.buffer, '_wgraph_epoch', None)}; this one is epoch {self.epoch})")
        epoch = getattr(t.buffer, "_wgraph_epoch", None)
        if epoch != self.epoch:
            raise DeviceError(f"{where}: {t!r} is a captured item of another device or of epoch {epoch} (the device "
                              f"is now epoch {self.epoch}); capture it again after dev.recreate()")
        poison = t.poisoned
        if poison is not None:
            raise RecordingError(f"{where}: {t!r}: {poison}")

    def _start_pending(self) -> CommandList:
        self._pending = CommandList(self, label="wgraph.immediate")
        return self._pending

    @property
    def pending(self) -> tuple:
        """The items (Dispatch, Copy, Write) of immediate ops waiting for the next flush, in order."""
        pending = self._pending
        return () if pending is None else tuple(pending.items)

    def take_pending(self) -> list:
        """The pending items, removed (a recording submits them at its front, in its one submit). Lock held."""
        pending, self._pending = self._pending, None
        return [] if pending is None else pending.items

    def restore_pending(self, items) -> None:
        """Put items take_pending() took back in front of the pending list (the recording that took them failed
        before they ran). Lock held."""
        if items:
            pending = self._pending or self._start_pending()
            pending.items[:0] = items

    def flush(self) -> None:
        """Submit the pending immediate ops now (one submit; nothing when none wait). If the submit raises, the
        tensors those ops write become unusable, naming why: never left holding what was there before."""
        with self.lock:
            self.check_open()   # the device was destroyed (on any thread): its pending ops died with it
            pending, self._pending = self._pending, None
            if pending is not None:
                try:
                    pending.submit()
                except BaseException as e:
                    pending.poison_writes(f"the pending ops that write this tensor never ran: their submit raised "
                                          f"{type(e).__name__}: {str(e)[:200]}", self.owned)
                    raise

    # ---- the queue: writes and submits in call order ----

    def write(self, tensor, data: bytes) -> None:
        """`dev.write`'s bytes (padded to 4), in its place among the op calls around it: an item of the open
        recording, else of the pending list while immediate ops wait, else a queue write now."""
        write = Write(tensor, data, label=f"write {tensor.label or 'tensor'}")
        rec = self.open_recording()
        if rec is not None:
            rec.append(write)
            return
        with self.lock:
            self.check_current((tensor,))
            if self._pending is not None:
                self._pending.append(write)
                # a write is an item too: a run of writes behind one pending op held every write's bytes (and
                # staged them all in upload buffers at the flush) until the next op call or read
                if len(self._pending.items) >= PENDING_ITEMS:
                    self.flush()
            else:
                self.gpu.queue.write_buffer(tensor.buffer, 0, data)

    def write_buffer(self, buffer, offset: int, data) -> None:
        """`queue.write_buffer`, after the pending immediate ops are submitted (else it would land before them)."""
        if self._pending is not None:
            self.flush()
        self.gpu.queue.write_buffer(buffer, offset, data)

    def submit(self, command_buffer) -> int:
        """Submit one finished command buffer after the pending immediate ops; returns its index."""
        if self._pending is not None:
            self.flush()
        index = submit_for_index(self.gpu.queue, command_buffer)
        self.last_index = self.pool.submitted = index
        self.stats.submits += 1
        return index

    def uniform_buffer(self, data: bytes, persistent: bool = False, slices: int = 1) -> UniformBuffer:
        """A uniform buffer holding `data` (a command list's arena of `slices` uniform structs). A small
        one-shot arena of one slice comes from a cache keyed by its full bytes: calls of one op repeat it, so
        a repeated op writes nothing. Others (an arena of several ops rarely repeats, and caching each would
        only fill the cache) come from the pool, written now, given back by `release()` (a persistent one
        when its Program dies)."""
        if not persistent and slices == 1 and len(data) <= CACHED_UNIFORM_BYTES:
            buf, _created = self.uniforms.get(data)
            return UniformBuffer(buf, None)
        return UniformBuffer(self._new_uniform(data), self._release_uniform)

    def _new_uniform(self, data: bytes):
        buf = self.pool.acquire(len(data), UNIFORM_USAGE)
        self.write_buffer(buf, 0, data)
        self.stats.uniform_bytes_written += len(data)
        return buf

    def _release_uniform(self, buf) -> None:
        self.pool.release(buf, UNIFORM_USAGE)

    # ---- waiting ----

    def fence(self) -> int:
        """A token for all work submitted so far (the pending ops are submitted first)."""
        self.flush()
        return self.last_index

    def wait(self, fence: int) -> None:
        """Block until the submissions up to `fence` are done on the GPU (no readback); destroy what waited."""
        if fence <= 0:
            return  # nothing was submitted
        if fence > self.last_index:  # wgpu-native panics on an index it has not issued
            raise DeviceError(f"fence {fence} was never issued on this device (its last is {self.last_index})")
        wait_for_index(self.gpu, fence)
        self.stats.gpu_waits += 1
        self.completed(fence)

    def wait_idle(self) -> None:
        """Wait for everything submitted (the pending ops first) and destroy the buffers that waited for it."""
        with self.lock:
            self.check_open()
            self.flush()
            if self.last_index:   # else nothing was ever submitted: no wait, none counted (as wait(0))
                wait_for_index(self.gpu, self.last_index)
                self.stats.gpu_waits += 1
            self.completed(self.last_index)

    def completed(self, index: int) -> None:
        """The submissions up to `index` are done on the GPU (a wait or a readback saw it)."""
        with self.lock:
            self.pool.collect(index)
