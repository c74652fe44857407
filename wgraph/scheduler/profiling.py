"""GPU timestamps around each dispatch of a recording, and the per-label table made from them."""

from __future__ import annotations

import struct
from collections import defaultdict

import attrs
import wgpu


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
        begins, ends = ticks[0::2], ticks[1::2]
        totals, counts = defaultdict(int), defaultdict(int)
        for label, begin, end in zip(labels, begins, ends):
            totals[label] += max(0, end - begin)
            counts[label] += 1
        rows = tuple(ProfileRow(label, counts[label], totals[label] / 1000.0) for label in totals)
        return cls(rows, inside_passes, max(0, max(ends) - min(begins)) / 1000.0)

    def __str__(self) -> str:
        lines = [f"{'label':32} {'count':>6} {'total us':>10} {'mean us':>10}"]
        lines += [f"{r.label:32} {r.count:6d} {r.total_us:10.1f} {r.mean_us:10.2f}" for r in self.rows]
        lines.append(f"{'span (first start to last end)':32} {'':6} {self.span_us:10.1f}")
        return "\n".join(lines)
