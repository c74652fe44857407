"""Submission indices: wait for one submission's GPU work without a readback. wgpu-py 0.32 exposes neither
(its on_submitted_work_done has a broken callback signature), so this calls wgpu-native's
`wgpuQueueSubmitForIndex` and `wgpuDevicePoll(wait, index)` through wgpu-py's own cffi handle."""

from __future__ import annotations

from wgpu.backends.wgpu_native._api import ffi, libf


def submit_for_index(queue, command_buffer) -> int:
    """`queue.submit([command_buffer])`, returning wgpu-native's index of that submission."""
    arr = ffi.new("WGPUCommandBuffer[]", [command_buffer._internal])
    return int(libf.wgpuQueueSubmitForIndex(queue._internal, 1, arr))


def wait_for_index(device, index: int) -> None:
    """Block until the GPU has finished submission `index` (and so every one before it)."""
    libf.wgpuDevicePoll(device._internal, True, ffi.new("WGPUSubmissionIndex *", int(index)))
