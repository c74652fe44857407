"""Pipelines per (variant, device epoch) and bind groups by the identity of their buffers."""

from __future__ import annotations

import os
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import wgpu

from wgraph.errors import PlanError
from wgraph.kernels.registry import Kernel


def storage_binding_size(nbytes: int) -> int:
    """Bytes to bind for a tensor: storage bindings need a non-zero multiple of 4."""
    return max(4, -(-nbytes // 4) * 4)


class PipelineCache:
    """Compiled pipelines with explicit bind group layouts (shareable, unlike layout="auto"): one pipeline per
    (variant, overridable constants), one bind group layout per variant, which its specializations share (so
    do its bind groups: BindGroupCache keys them by the layout).

    The keys hold the kernel's code (its preprocessed source and entry point), not only its name: a name is unique
    within one registry, but two registries (load_registry of another directory) may name different code alike,
    and keyed on the name the second ran the first one's pipeline (a define apart: y = 2x where 3x was loaded)."""

    def __init__(self, device):
        self._device = device
        self._pipelines: dict[tuple, tuple] = {}
        self._layouts: dict[tuple, tuple] = {}

    def _key(self, kernel: Kernel) -> tuple:
        # the source str hashes once (CPython caches it) and compares by identity first: a cheap key
        return kernel.name, kernel.entry, kernel.source, tuple(kernel.constants.items()), self._device.epoch

    def _layout_key(self, kernel: Kernel) -> tuple:
        return kernel.name, kernel.source, self._device.epoch

    def get(self, kernel: Kernel):
        hit = self._pipelines.get(self._key(kernel))
        if hit is not None:
            return hit
        layouts = self._layouts.get(self._layout_key(kernel)) or self._create_layouts(kernel)
        return self._store(kernel, layouts, self._create_pipeline(kernel, layouts))

    def warm(self, kernels, threads: int | None = None) -> int:
        """Compile the pipelines of `kernels` (specialized Kernels) that are not compiled yet, each variant's on
        one of up to `threads` threads (default: the CPU count, at most 8); the number compiled. Creating a
        pipeline is the driver's shader compiler (tens of ms a kernel on lavapipe), wgpu-native's objects may be
        created from several threads, and its calls release the GIL: a command list of many new kernels (a
        compiled model step) compiles them side by side. The caches are written by the calling thread."""
        by_variant: dict[tuple, list[Kernel]] = {}
        seen = set()
        for k in kernels:
            key = self._key(k)
            if key not in self._pipelines and key not in seen:
                seen.add(key)
                by_variant.setdefault(self._layout_key(k), []).append(k)
        work = list(by_variant.values())
        count = len(seen)
        threads = min(8, os.cpu_count() or 1) if threads is None else threads
        if count < 2 or threads < 2:
            for ks in work:
                for k in ks:
                    self.get(k)
            return count

        def compile_variant(ks):
            layouts = self._layouts.get(self._layout_key(ks[0])) or self._create_layouts(ks[0], store=False)
            return layouts, [self._create_pipeline(k, layouts) for k in ks]

        with ThreadPoolExecutor(min(threads, len(work))) as pool:
            for ks, (layouts, made) in zip(work, pool.map(compile_variant, work)):
                self._layouts.setdefault(self._layout_key(ks[0]), layouts)
                for k, pipeline in zip(ks, made):
                    self._store(k, layouts, pipeline)
        return count

    def _create_pipeline(self, kernel: Kernel, layouts: tuple):
        if kernel.overrides and not kernel.constants:
            raise PlanError(f"kernel {kernel.name} needs its overridable constants {sorted(kernel.overrides)} "
                            f"(Kernel.specialized)")
        _bgl, layout, module = layouts
        return self._device.wgpu.create_compute_pipeline(
            label=kernel.name, layout=layout,
            compute={"module": module, "entry_point": kernel.entry, "constants": dict(kernel.constants)},
        )

    def _store(self, kernel: Kernel, layouts: tuple, pipeline) -> tuple:
        self._device.stats.pipelines_created += 1
        self._pipelines[self._key(kernel)] = (pipeline, layouts[0])
        return pipeline, layouts[0]

    def _create_layouts(self, kernel: Kernel, store: bool = True):
        """The variant's bind group layout, pipeline layout and shader module (its specializations' too);
        cached unless `store` is False (a warm() thread: the calling thread stores them)."""
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
        layouts = (bgl, gpu.create_pipeline_layout(label=kernel.name, bind_group_layouts=[bgl]),
                   gpu.create_shader_module(label=kernel.name, code=kernel.source))
        if store:
            self._layouts[self._layout_key(kernel)] = layouts
        return layouts

    def clear(self):
        self._pipelines.clear()
        self._layouts.clear()


class BindGroupCache:
    """Bind groups keyed by (bind group layout, epoch, uniform buffer, every bound buffer and size), LRU-bounded.
    The layout, not the variant's name: two kernels of one name (from two registries) may bind differently.

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
        key = (bgl, self._device.epoch, uniform_buffer, tuple(buffers), tuple(sizes))
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
