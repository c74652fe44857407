"""Pipelines per (variant, device epoch) and bind groups by the identity of their buffers."""

from __future__ import annotations

from collections import OrderedDict

import wgpu

from wgraph.errors import PlanError
from wgraph.kernels.registry import Kernel


def storage_binding_size(nbytes: int) -> int:
    """Bytes to bind for a tensor: storage bindings need a non-zero multiple of 4."""
    return max(4, -(-nbytes // 4) * 4)


class PipelineCache:
    """Compiled pipelines with explicit bind group layouts (shareable, unlike layout="auto"): one pipeline per
    (variant, overridable constants), one bind group layout per variant, which its specializations share (so
    do its bind groups: BindGroupCache keys them by the variant's name)."""

    def __init__(self, device):
        self._device = device
        self._pipelines: dict[tuple, tuple] = {}
        self._layouts: dict[tuple[str, int], tuple] = {}

    def get(self, kernel: Kernel):
        key = (kernel.name, tuple(kernel.constants.items()), self._device.epoch)
        hit = self._pipelines.get(key)
        if hit is not None:
            return hit
        if kernel.overrides and not kernel.constants:
            raise PlanError(f"kernel {kernel.name} needs its overridable constants {sorted(kernel.overrides)} "
                            f"(Kernel.specialized)")
        gpu = self._device.wgpu
        bgl, layout, module = self._module(kernel)
        pipeline = gpu.create_compute_pipeline(
            label=kernel.name, layout=layout,
            compute={"module": module, "entry_point": kernel.entry, "constants": dict(kernel.constants)},
        )
        self._device.stats.pipelines_created += 1
        self._pipelines[key] = (pipeline, bgl)
        return pipeline, bgl

    def _module(self, kernel: Kernel):
        """The variant's bind group layout, pipeline layout and shader module (its specializations' too)."""
        key = (kernel.name, self._device.epoch)
        hit = self._layouts.get(key)
        if hit is not None:
            return hit
        gpu = self._device.wgpu
        entries = []
        for b in kernel.bindings:
            if b.space == "uniform":
                layout = {"type": wgpu.BufferBindingType.uniform, "has_dynamic_offset": True}
            elif b.writes:
                layout = {"type": wgpu.BufferBindingType.storage}
            else:
                layout = {"type": wgpu.BufferBindingType.read_only_storage}
            entries.append({"binding": b.binding, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": layout})
        bgl = gpu.create_bind_group_layout(label=kernel.name, entries=entries)
        self._layouts[key] = (bgl, gpu.create_pipeline_layout(label=kernel.name, bind_group_layouts=[bgl]),
                              gpu.create_shader_module(label=kernel.name, code=kernel.source))
        return self._layouts[key]

    def clear(self):
        self._pipelines.clear()
        self._layouts.clear()


class BindGroupCache:
    """Bind groups keyed by (variant, epoch, uniform buffer, every bound buffer and size), LRU-bounded.

    The key holds the buffer objects themselves, so a cached entry keeps its buffers alive and an id is
    never reused while cached. The uniform binding takes a dynamic offset, so one bind group serves every
    uniform slice of an arena.
    """

    def __init__(self, device, capacity: int = 4096):
        self._device = device
        self._capacity = capacity
        self._groups: OrderedDict[tuple, object] = OrderedDict()

    def get(self, kernel: Kernel, bgl, uniform_buffer, tensors):
        # one pass over the tensors builds the key: this runs for every dispatch a batch encodes
        buffers, sizes = [], []
        for t in tensors:
            buffers.append(t.buffer)
            n = t.nbytes
            sizes.append(n + (-n % 4) if n > 4 else 4)  # == storage_binding_size(n)
        key = (kernel.name, self._device.epoch, uniform_buffer, tuple(buffers), tuple(sizes))
        group = self._groups.get(key)
        if group is not None:
            self._groups.move_to_end(key)
            return group
        entries = []
        storage = iter(zip(tensors, sizes))
        for b in kernel.bindings:
            if b.space == "uniform":
                resource = {"buffer": uniform_buffer, "offset": 0, "size": kernel.uniform.size}
            else:
                t, size = next(storage)
                resource = {"buffer": t.buffer, "offset": 0, "size": size}
            entries.append({"binding": b.binding, "resource": resource})
        group = self._device.wgpu.create_bind_group(label=kernel.name, layout=bgl, entries=entries)
        self._device.stats.bind_groups_created += 1
        self._groups[key] = group
        if len(self._groups) > self._capacity:
            self._groups.popitem(last=False)
        return group

    def forget_buffer(self, buffer):
        """Drop every bind group that uses `buffer` (before the buffer is destroyed)."""
        for key in [k for k in self._groups if k[2] is buffer or buffer in k[3]]:
            del self._groups[key]

    def clear(self):
        self._groups.clear()
