"""Encoding and submission: dispatches share one compute pass until a copy (or per-pass timestamps) ends
it, and a whole batch goes to the GPU in one `queue.submit`."""

from __future__ import annotations

import struct
import threading
from collections import defaultdict

import attrs
import wgpu

from wgraph.errors import RecordingError
from wgraph.scheduler.dispatch import Copy, Dispatch
from wgraph.scheduler.uniforms import UniformArena


def align4(n: int) -> int:
    return -(-n // 4) * 4


class Timestamps:
    """Timestamp queries around each dispatch: inside the pass where the device can, else a pass each."""

    def __init__(self, device, count: int):
        self.inside_passes = device.caps.has_timestamps_inside_passes
        self.count = count
        self.query_set = device.wgpu.create_query_set(type=wgpu.QueryType.timestamp, count=2 * count)
        self.resolve = device.wgpu.create_buffer(size=16 * count, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
        self.readback = device.wgpu.create_buffer(size=16 * count, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)

    def finish(self, encoder):
        encoder.resolve_query_set(self.query_set, 0, 2 * self.count, self.resolve, 0)
        encoder.copy_buffer_to_buffer(self.resolve, 0, self.readback, 0, 16 * self.count)

    def ticks_ns(self) -> tuple[int, ...]:
        """(begin, end) of every dispatch, flat; wgpu reports nanoseconds on Vulkan, Metal and D3D12."""
        self.readback.map_sync(wgpu.MapMode.READ)
        ticks = struct.unpack(f"<{2 * self.count}Q", self.readback.read_mapped())
        self.readback.unmap()
        return ticks


def prepare_items(device, items, uniform_slots) -> list:
    """Resolve each Dispatch of `items` to (dispatch, pipeline, bind group, dynamic offsets) from the device's
    caches; a Copy stays as it is. A compiled Program keeps this list and re-encodes it on every replay."""
    steps = []
    for item, slot in zip(items, uniform_slots):
        if isinstance(item, Copy):
            steps.append(item)
            continue
        pipeline, bgl = device.pipelines.get(item.kernel)
        uniform_buffer, offset = slot if slot is not None else (None, 0)
        group = device.bind_groups.get(item.kernel, bgl, uniform_buffer, item.tensors)
        steps.append((item, pipeline, group, [offset] if uniform_buffer is not None else []))
    return steps


def encode_prepared(device, encoder, steps, timestamps: Timestamps | None = None):
    """Encode prepared steps (see prepare_items) into `encoder`; consecutive dispatches share a compute pass."""
    # This loop is the host cost of a recorded op and of a replay: only the wgpu calls and a few lookups.
    # set_pipeline is skipped while the pass already has that pipeline (WebGPU keeps it across dispatches).
    stats = device.stats
    per_pass_stamps = timestamps is not None and not timestamps.inside_passes
    inside_stamps = timestamps is not None and timestamps.inside_passes
    compute_pass = None
    current_pipeline = None
    n_dispatch = 0
    for step in steps:
        if isinstance(step, Copy):
            if compute_pass is not None:
                compute_pass.end()
                compute_pass = None
            encoder.copy_buffer_to_buffer(step.src.buffer, step.src_offset, step.dst.buffer, step.dst_offset, align4(step.nbytes))
            stats.copies += 1
            continue
        item, pipeline, group, offsets = step
        if compute_pass is None or per_pass_stamps:
            if compute_pass is not None:
                compute_pass.end()
            writes = None
            if per_pass_stamps:
                writes = {"query_set": timestamps.query_set, "beginning_of_pass_write_index": 2 * n_dispatch,
                          "end_of_pass_write_index": 2 * n_dispatch + 1}
            compute_pass = encoder.begin_compute_pass(label=item.label, timestamp_writes=writes)
            current_pipeline = None
            stats.compute_passes += 1
        if pipeline is not current_pipeline:
            compute_pass.set_pipeline(pipeline)
            current_pipeline = pipeline
        compute_pass.set_bind_group(0, group, offsets)
        if inside_stamps:
            compute_pass._write_timestamp(timestamps.query_set, 2 * n_dispatch)
        if item.indirect is not None:
            args, args_offset = item.indirect
            compute_pass.dispatch_workgroups_indirect(args.buffer, args_offset)
        else:
            compute_pass.dispatch_workgroups(*item.workgroups)
        if inside_stamps:
            compute_pass._write_timestamp(timestamps.query_set, 2 * n_dispatch + 1)
        n_dispatch += 1
    stats.dispatches += n_dispatch
    if compute_pass is not None:
        compute_pass.end()


def encode_items(device, encoder, items, uniform_slots, timestamps: Timestamps | None = None):
    """Encode `items` (Dispatch or Copy) into `encoder`. `uniform_slots[i]` is (buffer, offset) for the
    i-th item's uniforms, or None. Consecutive dispatches share a compute pass."""
    encode_prepared(device, encoder, prepare_items(device, items, uniform_slots), timestamps)


@attrs.frozen
class ProfileRow:
    label: str
    count: int
    total_us: float

    @property
    def mean_us(self) -> float:
        return self.total_us / self.count


@attrs.frozen
class ProfileTable:
    """GPU time per dispatch label, from timestamp queries."""

    rows: tuple[ProfileRow, ...]
    inside_passes: bool
    span_us: float = 0.0  # first dispatch's start to last dispatch's end: GPU time of the whole recording

    def __str__(self) -> str:
        lines = [f"{'label':32} {'count':>6} {'total us':>10} {'mean us':>10}"]
        lines += [f"{r.label:32} {r.count:6d} {r.total_us:10.1f} {r.mean_us:10.2f}" for r in self.rows]
        lines.append(f"{'span (first start to last end)':32} {'':6} {self.span_us:10.1f}")
        return "\n".join(lines)


class Recording:
    """Dispatches appended by op calls, encoded into one command encoder and sent in one submit.

    Use `with dev.record() as rec:`; leaving the block submits, an exception inside it submits nothing.
    """

    def __init__(self, device, profile: bool = False):
        self.device = device
        self.items: list = []
        self.state = "open"
        self._want_profile = profile
        self._timestamps: Timestamps | None = None
        self._ticks: tuple[int, ...] | None = None
        self._labels: list[str] = []
        self._thread = threading.get_ident()  # a recording belongs to the thread that made it

    def _check_open(self):
        if self.state != "open":
            raise RecordingError(f"this recording was already {self.state}; start a new one with dev.record()")
        if threading.get_ident() != self._thread:
            raise RecordingError(f"this recording belongs to thread {self._thread}, not to thread "
                                 f"{threading.get_ident()}; each thread records with its own dev.record()")

    def append(self, item):
        self._check_open()
        self.items.append(item)

    def writes(self, tensor) -> bool:
        """Whether a pending item of this recording writes `tensor`'s buffer."""
        for item in self.items:
            targets = (item.dst,) if isinstance(item, Copy) else item.writes()
            if any(t.buffer is tensor.buffer for t in targets):
                return True
        return False

    def submit(self):
        """Encode every item into one encoder and submit it once."""
        self._check_open()
        device = self.device
        device.check_alive()
        device.check_items(self.items)
        with device.lock:
            device.check_alive()
            self._submit_locked(device)

    def _submit_locked(self, device):
        dispatches = [i for i in self.items if isinstance(i, Dispatch)]
        self._labels = [d.label or d.kernel.name for d in dispatches]
        if self._want_profile and device.caps.has_timestamps and dispatches:
            self._timestamps = Timestamps(device, len(dispatches))
        arena = UniformArena(device.caps.min_uniform_offset_alignment)
        offsets = [arena.add(i.uniforms) if isinstance(i, Dispatch) and i.kernel.uniform else None for i in self.items]
        arena_buffer = None
        if len(arena):
            arena_buffer = device._acquire_uniform(len(arena))
            device.wgpu.queue.write_buffer(arena_buffer, 0, arena.data)
            device.stats.uniform_bytes_written += len(arena)
        slots = [None if off is None else (arena_buffer, off) for off in offsets]
        encoder = device.wgpu.create_command_encoder(label="wgraph.recording")
        encode_items(device, encoder, self.items, slots, self._timestamps)
        if self._timestamps is not None:
            self._timestamps.finish(encoder)
        device._submit(encoder.finish())
        if arena_buffer is not None:
            device._release_uniform(arena_buffer)
        self.state = "submitted"
        self.items = []

    def discard(self):
        """Drop every pending item without submitting; the tensors they held go back to the pool."""
        self._check_open()
        self.items = []
        self.state = "discarded"

    def profile(self) -> ProfileTable:
        """Per-label GPU time of a submitted `record(profile=True)`."""
        if self.state != "submitted":
            raise RecordingError("profile() needs a submitted recording")
        if not self._want_profile:
            raise RecordingError("this recording was not made with record(profile=True)")
        if self._timestamps is None:
            raise RecordingError(f"device {self.device.caps.adapter_name!r} has no timestamp-query feature")
        if self._ticks is None:
            self._ticks = self._timestamps.ticks_ns()
        begins, ends = self._ticks[0::2], self._ticks[1::2]
        totals, counts = defaultdict(int), defaultdict(int)
        for label, begin, end in zip(self._labels, begins, ends):
            totals[label] += max(0, end - begin)
            counts[label] += 1
        rows = tuple(ProfileRow(label, counts[label], totals[label] / 1000.0) for label in totals)
        return ProfileTable(rows, self._timestamps.inside_passes, max(0, max(ends) - min(begins)) / 1000.0)

    def __enter__(self):
        self._check_open()
        self.device._push_recording(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.device._pop_recording(self)
        if self.state != "open":
            return False
        if exc_type is not None:
            self.discard()
        else:
            self.submit()
        return False
