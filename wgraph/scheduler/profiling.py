"""GPU timestamps around each dispatch of a command list (a recording, a Program replay), and the per-label
table of a recording made from them (a Program's per-node table: graph/profile.py)."""

from __future__ import annotations

import math
import struct
from collections import defaultdict

import attrs
import wgpu

MAX_QUERIES = 4096  # WebGPU's (and wgpu's) most queries in one query set: a begin and an end per dispatch


def timestamp_period_ns(gpu) -> float:
    """Nanoseconds per timestamp tick of `gpu` (a wgpu device). wgpu-native resolves the GPU's raw ticks unless its
    instance normalizes them (InstanceFlag.AutomaticTimestampNormalization, off by default): a tick is 1 ns on
    NVIDIA and lavapipe, ~52 ns on Intel (Vulkan's timestampPeriod). 1.0 where wgpu-py cannot ask."""
    try:
        from wgpu.backends.wgpu_native._ffi import lib

        period = float(lib.wgpuQueueGetTimestampPeriod(gpu.queue._internal))
    except Exception:  # noqa: BLE001 - another backend, or a wgpu-native without the call
        return 1.0
    return period if period > 0 and math.isfinite(period) else 1.0


class Timestamps:
    """Timestamp queries around each dispatch: inside the pass where the device can, else a pass each.

    A query set holds MAX_QUERIES stamps, so dispatch i's pair goes to set i // per_set (a program or recording
    of any length is timed whole); each set is resolved into its own buffer and copied into one readback at
    its first dispatch's place (a resolve's destination offset must be 256-aligned, a copy's only 4). Its buffers
    count in `stats` (the device's Stats) as made, and as destroyed once ticks_ns has read them (a readback)."""

    def __init__(self, gpu, count: int, inside_passes: bool, stats):
        if count < 1:
            raise ValueError(f"Timestamps: count={count} must be at least 1 (a dispatch to time)")
        self.period_ns = timestamp_period_ns(gpu)
        self.inside_passes = inside_passes
        self.count = count
        self.per_set = MAX_QUERIES // 2   # dispatches a set times: both stamps of one dispatch in the same set
        firsts = range(0, count, self.per_set)
        self.query_sets = [gpu.create_query_set(type=wgpu.QueryType.timestamp, count=2 * min(self.per_set, count - f))
                           for f in firsts]
        self.resolves = [gpu.create_buffer(size=8 * qs.count,
                                           usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
                         for qs in self.query_sets]
        self.readback = gpu.create_buffer(size=16 * count, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        self.stats = stats
        stats.buffers_created += len(self.resolves) + 1

    def slot(self, dispatch: int):
        """(query set, index of the begin stamp) of dispatch number `dispatch`; its end stamp is the next index."""
        s, k = divmod(dispatch, self.per_set)
        return self.query_sets[s], 2 * k

    def finish(self, encoder):
        for i, (qs, resolve) in enumerate(zip(self.query_sets, self.resolves)):
            encoder.resolve_query_set(qs, 0, qs.count, resolve, 0)
            encoder.copy_buffer_to_buffer(resolve, 0, self.readback, 16 * i * self.per_set, 8 * qs.count)

    def ticks_ns(self) -> tuple[int, ...]:
        """(begin, end) of every dispatch, flat, in nanoseconds (the raw ticks times the timestamp period)."""
        self.readback.map_sync(wgpu.MapMode.READ)
        ticks = struct.unpack(f"<{2 * self.count}Q", self.readback.read_mapped())
        self.readback.unmap()
        self.stats.readbacks += 1
        for buffer in (*self.resolves, self.readback):
            buffer.destroy()
        self.stats.buffers_destroyed += len(self.resolves) + 1
        if self.period_ns == 1.0:
            return ticks
        return tuple(round(t * self.period_ns) for t in ticks)


def dispatch_times_us(ticks) -> tuple[list[float], float]:
    """Each dispatch's GPU time (end - begin) and the span from the first begin to the last end, in µs."""
    begins, ends = ticks[0::2], ticks[1::2]
    times = [max(0, end - begin) / 1000.0 for begin, end in zip(begins, ends)]
    return times, max(0, max(ends) - min(begins)) / 1000.0


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

    @classmethod
    def from_ticks(cls, labels, ticks, inside_passes: bool) -> ProfileTable:
        times, span = dispatch_times_us(ticks)
        totals, counts = defaultdict(float), defaultdict(int)
        for label, us in zip(labels, times):
            totals[label] += us
            counts[label] += 1
        rows = tuple(ProfileRow(label, counts[label], totals[label]) for label in totals)
        return cls(rows, inside_passes, span)

    def __str__(self) -> str:
        lines = [f"{'label':32} {'count':>6} {'total us':>10} {'mean us':>10}"]
        lines += [f"{r.label:32} {r.count:6d} {r.total_us:10.1f} {r.mean_us:10.2f}" for r in self.rows]
        lines.append(f"{'span (first start to last end)':32} {'':6} {self.span_us:10.1f}")
        return "\n".join(lines)
