"""The three compute-pass calls made per dispatch (set pipeline, set bind group, dispatch), straight into
wgpu-native through wgpu-py's own cffi handle.

Why: wgpu-py wraps every native call in Python error capture (about 1 µs each, three per dispatch: most of
the host cost of encoding a recorded op). wgpu-native records pass commands without validating them; they
are validated when the pass ends and the encoder finishes, and those two calls still go through wgpu-py,
which raises any error there. Every dispatch reaching here was checked by ctx.dispatch.
The pinned wgpu-py (pyproject: >=0.32,<0.33) exposes `lib`, `ffi` and `_internal` handles as used here."""

from __future__ import annotations

from wgpu.backends.wgpu_native._api import ffi, lib

set_pipeline = lib.wgpuComputePassEncoderSetPipeline
set_bind_group = lib.wgpuComputePassEncoderSetBindGroup
dispatch_workgroups = lib.wgpuComputePassEncoderDispatchWorkgroups
dispatch_workgroups_indirect = lib.wgpuComputePassEncoderDispatchWorkgroupsIndirect

NO_OFFSETS = ffi.NULL


def offsets_array(offsets: list[int]):
    """Dynamic offsets as the uint32_t array set_bind_group takes (made once per prepared dispatch)."""
    return ffi.new("uint32_t[]", offsets) if offsets else NO_OFFSETS
