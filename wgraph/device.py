"""The device: adapter choice, features and limits, capabilities, caches, counters, upload and readback."""

from __future__ import annotations

import itertools
import os
import threading

import attrs
import numpy as np
import wgpu

from wgraph import device_errors
from wgraph.dtypes import dtype_info, dtype_of_numpy, from_bf16
from wgraph.errors import DeviceError, LimitError, RecordingError, ShapeError, UnsupportedError
from wgraph.host_arrays import host_array
from wgraph.scheduler.templates import TemplateCache
from wgraph.scheduler.commands import CommandList, align4
from wgraph.scheduler.dispatch import Write
from wgraph.scheduler.fence import submit_for_index, wait_for_index
from wgraph.kernels.pipelines import BindGroupCache, PipelineCache
from wgraph.scheduler.pool import BufferPool
from wgraph.scheduler.recording import Recording
from wgraph.kernels.registry import KNOWN_FEATURES
from wgraph.kernels.uniforms import UniformCache
from wgraph.tensor import Tensor, TensorSpec

TENSOR_USAGE = (
    wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.INDIRECT
)
UNIFORM_USAGE = wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
CACHED_UNIFORM_BYTES = 512  # one-slice arenas up to this size get a buffer per distinct content (uniform_buffer)
# Released buffers past the pool's budget wait for the GPU before they are destroyed. Past this many bytes
# waiting, the next allocation waits for the GPU and destroys them (else memory grows without a readback).
DEFERRED_DESTRUCTION_BYTES = 64 << 20
# Immediate ops wait in the device's pending command list and go to the GPU in one submit when a result is
# read, before any other submission or queue write, on dev.flush(), or when this many items wait (so a long
# loop of immediate ops keeps the GPU busy while the host encodes the next ones).
PENDING_ITEMS = 32

_epochs = itertools.count(1)
POWER_PREFERENCES = ("high-performance", "low-power")


@attrs.frozen
class Caps:
    """What the device can do: the facts the planners decide on."""

    adapter_name: str
    backend: str = "unknown"
    is_cpu: bool = False  # a software rasterizer such as lavapipe: correct, slow, and slow to compile shaders
    has_f16: bool = False
    has_subgroups: bool = False
    has_timestamps: bool = False
    has_timestamps_inside_passes: bool = False
    subgroup_min_size: int = 0
    subgroup_max_size: int = 0
    max_workgroup_storage: int = 16384
    max_workgroups_per_dim: int = 65535
    max_invocations_per_workgroup: int = 256
    max_storage_binding_size: int = 128 << 20
    max_buffer_size: int = 256 << 20
    min_uniform_offset_alignment: int = 256

    @classmethod
    def synthetic(cls, **facts) -> Caps:
        """Caps for planner tests: WebGPU's default limits unless `facts` say otherwise."""
        return cls(adapter_name=facts.pop("adapter_name", "synthetic"), **facts)

    @property
    def features(self) -> frozenset[str]:
        names = {"shader-f16": self.has_f16, "subgroup": self.has_subgroups, "timestamp-query": self.has_timestamps,
                 "timestamp-query-inside-passes": self.has_timestamps_inside_passes}
        return frozenset(k for k, v in names.items() if v)


@attrs.define
class Stats:
    """Counters of GPU work. Tests diff two snapshots to prove what a call did."""

    submits: int = 0
    compute_passes: int = 0
    dispatches: int = 0
    copies: int = 0
    uniform_bytes_written: int = 0
    buffers_created: int = 0
    buffers_destroyed: int = 0
    pipelines_created: int = 0
    bind_groups_created: int = 0
    readbacks: int = 0
    staging_buffers_created: int = 0
    gpu_waits: int = 0  # waits for the GPU that were not a readback (deferred destruction past its budget)

    def snapshot(self) -> Stats:
        return attrs.evolve(self)

    def since(self, before: Stats) -> Stats:
        return Stats(**{k: getattr(self, k) - getattr(before, k) for k in attrs.asdict(self)})

    @property
    def live_buffers(self) -> int:
        return self.buffers_created - self.buffers_destroyed


def _info_int(info, suffix: str) -> int:
    # wgpu-py 0.32 spells the subgroup size keys "stackgroup_*"; accept either spelling.
    for key in (f"subgroup_{suffix}", f"stackgroup_{suffix}"):
        if info.get(key):
            return int(info[key])
    return 0


def _choose_adapter(power_preference: str):
    wanted = os.environ.get("WGRAPH_ADAPTER")
    if wanted:
        adapters = wgpu.gpu.enumerate_adapters_sync()
        for a in adapters:
            if wanted.lower() in a.summary.lower():
                return a
        raise DeviceError(f"WGRAPH_ADAPTER={wanted!r} matches none of: {[a.summary for a in adapters]}")
    adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
    if adapter is None:
        raise DeviceError("no WebGPU adapter found (on a machine without a GPU, install mesa-vulkan-drivers)")
    return adapter


class Device:
    """A WebGPU device with every feature wgraph can use that the adapter has, at the adapter's limits.

    `epoch` changes whenever the underlying device is replaced; every cache is keyed on it.
    """

    def __init__(self, power_preference: str = "high-performance", adapter=None):
        if power_preference not in POWER_PREFERENCES:
            raise DeviceError(f"power_preference {power_preference!r} is not one of {POWER_PREFERENCES}")
        self.adapter = adapter or _choose_adapter(power_preference)
        self.stats = Stats()
        self._local = threading.local()
        # One lock serialises everything that touches the wgpu device, the pool, the caches and the counters,
        # so op calls, recordings and programs on several threads are safe (docs/concurrency.md). Re-entrant:
        # a tensor finalizer may run inside a locked call on the same thread.
        self.lock = threading.RLock()
        self._serial = 0  # submissions made
        self._pending: CommandList | None = None  # immediate ops not yet submitted (PENDING_ITEMS)
        self._completed = 0  # submissions known to be finished on the GPU
        self._open()

    # ---- lifetime ----

    def _open(self):
        adapter = self.adapter
        features = [f for f in KNOWN_FEATURES if f in adapter.features]
        limits = {k: v for k, v in adapter.limits.items()}
        self.wgpu = adapter.request_device_sync(label="wgraph", required_features=features, required_limits=limits)
        self.epoch = next(_epochs)
        self._last_index = 0  # wgpu-native's index of this device's last submission (fence/wait)
        self.lost = False
        info = adapter.info
        lim = self.wgpu.limits
        self.caps = Caps(
            adapter_name=adapter.summary,
            backend=str(info.get("backend_type", "unknown")),
            is_cpu=str(info.get("adapter_type", "")).lower() == "cpu",
            has_f16="shader-f16" in features,
            has_subgroups="subgroup" in features,
            has_timestamps="timestamp-query" in features,
            has_timestamps_inside_passes="timestamp-query-inside-passes" in features,
            subgroup_min_size=_info_int(info, "min_size"),
            subgroup_max_size=_info_int(info, "max_size"),
            max_workgroup_storage=lim["max-compute-workgroup-storage-size"],
            max_workgroups_per_dim=lim["max-compute-workgroups-per-dimension"],
            max_invocations_per_workgroup=lim["max-compute-invocations-per-workgroup"],
            max_storage_binding_size=lim["max-storage-buffer-binding-size"],
            max_buffer_size=lim["max-buffer-size"],
            min_uniform_offset_alignment=lim["min-uniform-buffer-offset-alignment"],
        )
        self.pipelines = PipelineCache(self)
        self.bind_groups = BindGroupCache(self)
        self.pool = BufferPool(self._create_buffer, self._destroy_buffer)
        self.uniform_cache = UniformCache(self._write_new_uniform, self._release_uniform)
        self.templates = TemplateCache()  # op templates of this epoch (scheduler/templates.py)
        self._staging = None
        self._idle_probe = None
        self._fallbacks: dict = {}
        self._error_flag: Tensor | None = None  # made on first use by a kernel that reports (device_errors.py)

    def destroy(self):
        """Destroy the underlying device (as a device loss does). Every later call raises DeviceError."""
        with self.lock:
            if self.lost:
                return
            # Every cache of the old device dies with it; pooled buffers count as destroyed (live_buffers).
            self.uniform_cache.clear()
            self._pending = None  # its work dies with the device
            self.lost = True
            self.wgpu.destroy()
            self.pool.clear()
            self.pipelines.clear()
            self.bind_groups.clear()
            self.templates.clear()
            self._fallbacks.clear()
            self._staging = None
            self._idle_probe = None
            self._error_flag = None

    def recreate(self):
        """Replace a lost device with a new one: a new epoch, and every cache, buffer and tensor of the old
        one invalid (using an old tensor raises DeviceError)."""
        with self.lock:
            if not self.lost:
                self.destroy()
            self._open()

    def check_alive(self):
        if self.lost:
            raise DeviceError(
                f"device {self.caps.adapter_name!r} (epoch {self.epoch}) is lost or destroyed; call dev.recreate()"
            )

    # ---- buffers ----

    def _create_buffer(self, size: int, usage: int):
        self.stats.buffers_created += 1
        buf = self.wgpu.create_buffer(size=size, usage=usage, label="wgraph")
        buf._wgraph_epoch = self.epoch
        return buf

    def _destroy_buffer(self, buf):
        self.bind_groups.forget_buffer(buf)
        self.stats.buffers_destroyed += 1
        if getattr(buf, "_wgraph_epoch", None) == self.epoch and not self.lost:
            buf.destroy()

    def release_buffer(self, buf, usage: int = TENSOR_USAGE):
        """A tensor (or a uniform arena) is done with `buf`: back to the pool, if it belongs to this epoch."""
        with self.lock:
            if getattr(buf, "_wgraph_epoch", None) != self.epoch or self.lost:
                self.stats.buffers_destroyed += 1  # its device is gone; the buffer went with it
                return
            self.pool.release(buf, usage, self._serial)

    def _acquire(self, nbytes: int, usage: int):
        with self.lock:
            if self.pool.deferred_bytes > DEFERRED_DESTRUCTION_BYTES:
                self.wait_idle()
            buf = self.pool.acquire(nbytes, usage)
            buf._wgraph_epoch = self.epoch
            return buf

    def _write_new_uniform(self, data: bytes):
        buf = self._acquire(len(data), UNIFORM_USAGE)
        self.queue_write(buf, 0, data)
        self.stats.uniform_bytes_written += len(data)
        return buf

    def queue_write(self, buffer, offset: int, data) -> None:
        """`queue.write_buffer`, after the pending immediate ops are submitted: the queue applies a write
        before the next submit, so a write queued while ops wait would land before them."""
        if self._pending is not None:
            self.flush()
        self.wgpu.queue.write_buffer(buffer, offset, data)

    def uniform_buffer(self, data: bytes, persistent: bool = False, slices: int = 1) -> UniformBuffer:
        """A uniform buffer holding `data` (a command list's arena of `slices` uniform structs). A small
        one-shot arena of one slice comes from a cache keyed by its full bytes: calls of one op repeat it, so
        a repeated op writes nothing. Others (an arena of several ops rarely repeats, and caching each would
        only fill the cache) come from the pool, written now, given back by `release()` (a persistent one
        when its Program dies)."""
        if not persistent and slices == 1 and len(data) <= CACHED_UNIFORM_BYTES:
            buf, _created = self.uniform_cache.get(data)
            return UniformBuffer(buf, None)
        return UniformBuffer(self._write_new_uniform(data), self._release_uniform)

    def _release_uniform(self, buf):
        self.release_buffer(buf, UNIFORM_USAGE)

    def empty(self, shape, dtype: str = "f32", label: str = "") -> Tensor:
        """A tensor with uninitialised contents (pooled storage)."""
        self.check_alive()
        spec = TensorSpec(shape, dtype)
        if spec.nbytes > self.caps.max_storage_binding_size:
            raise LimitError(
                f"tensor {spec.shape} {dtype} is {spec.nbytes} bytes; the device binds at most "
                f"{self.caps.max_storage_binding_size} bytes per storage buffer"
            )
        return Tensor(self, self._acquire(spec.nbytes, TENSOR_USAGE), spec, label)

    def tensor(self, array, dtype: str | None = None, label: str = "") -> Tensor:
        """Upload host data (f32, f16, bf16, u32, i32; host_arrays.py: array-likes, dtype= converts, 0-d stays
        0-d; dtype="bf16" rounds to nearest even, dtypes.py; int8/uint8 data packed with dtypes.pack_bytes_u32)."""
        data = host_array(array, dtype, convert=True, where="dev.tensor")
        dtype = dtype_of_numpy(data.dtype)
        if dtype == "f16" and not self.caps.has_f16:
            raise UnsupportedError(f"dtype f16 needs the shader-f16 feature, which {self.caps.adapter_name!r} lacks")
        t = self.empty(data.shape, dtype, label)
        self.write(t, data)
        return t

    def write(self, tensor: Tensor, array):
        """Overwrite a tensor's contents from host data of its dtype and size (host_arrays.py). The write
        keeps its place among the op calls around it, as on a stream: inside a recording it is an item of the
        recording; while immediate ops are pending it joins them; else it is queued now."""
        self.check_tensor(tensor)
        data = host_array(array, tensor.dtype, where=f"dev.write into {tensor!r}")
        if data.size != tensor.size:
            raise ShapeError(f"write of {data.shape} ({data.size} elements) into {tensor!r}")
        raw = data.tobytes()
        if len(raw) % 4:
            raw += b"\0" * (4 - len(raw) % 4)
        if not raw:
            return
        write = Write(tensor, raw, label=f"write {tensor.label or 'tensor'}")
        rec = self.recording
        if rec is not None:
            rec.append(write)
            return
        with self.lock:
            self.check_alive()
            if self._pending is not None:
                self._pending.append(write)
            else:
                self.wgpu.queue.write_buffer(tensor.buffer, 0, raw)

    def check_tensor(self, tensor: Tensor):
        """DeviceError unless `tensor` lives on this device in its current epoch."""
        self.check_alive()
        if tensor.device is not self:
            raise DeviceError(f"{tensor!r} belongs to another device ({tensor.device.caps.adapter_name!r})")
        if getattr(tensor.buffer, "_wgraph_epoch", None) != self.epoch:
            raise DeviceError(f"{tensor!r} was made before the device was re-created (epoch changed)")
        poison = tensor.poisoned
        if poison is not None:
            raise RecordingError(f"{tensor!r}: {poison}")

    def fallback(self, name: str, nbytes: int = 4) -> Tensor:
        """A small zero-filled tensor bound where a kernel's optional input is absent, one per epoch."""
        key = (name, nbytes, self.epoch)
        t = self._fallbacks.get(key)
        if t is None:
            with self.lock:
                t = self._fallbacks.get(key)
                if t is None:
                    t = self.tensor(np.zeros(nbytes // 4, np.uint32), "u32", label=f"fallback.{name}")
                    self._fallbacks[key] = t
        return t

    def error_flag(self) -> Tensor:
        """The device error flag that kernels checking GPU-resident values bind (wgraph/device_errors.py)."""
        flag = self._error_flag
        if flag is not None:
            return flag  # every attention dispatch asks: no lock once it exists
        with self.lock:
            if self._error_flag is None:
                self._error_flag = self.tensor(np.zeros(device_errors.FLAG_WORDS, np.uint32), "u32",
                                               label="device_errors")
            return self._error_flag

    def check_errors(self):
        """Wait for the GPU, then raise GpuValueError (and clear the flag) if a kernel reported a GPU value out
        of range since the last check or readback. Every readback checks too."""
        if self._error_flag is not None:
            self.read(self._error_flag)

    # ---- submission ----

    def record(self, profile: bool = False, label: str | None = None) -> Recording:
        """A recording: `with dev.record() as rec:` makes op calls and writes on this thread append instead
        of submit. `label` names it in errors (default "recording #n")."""
        self.check_alive()
        return Recording(self, profile=profile, label=label)

    @property
    def recording(self) -> Recording | None:
        """The recording open on this thread, if any."""
        stack = getattr(self._local, "stack", None)
        return stack[-1] if stack else None

    def push_recording(self, rec: Recording):
        """Make `rec` the open recording of this thread (Recording.__enter__)."""
        stack = self._local.__dict__.setdefault("stack", [])
        if stack:
            raise RecordingError("a recording is already open on this thread; nested recordings are not supported")
        stack.append(rec)

    def pop_recording(self, rec: Recording):
        stack = self._local.__dict__.get("stack", [])
        if stack and stack[-1] is rec:
            stack.pop()

    def run(self, items, outputs=()):
        """An op's items: appended to the open recording (which remembers `outputs`), else to the device's
        pending command list (the immediate path), submitted when PENDING_ITEMS wait or at the next flush."""
        self.check_alive()
        rec = self.recording
        if rec is not None:
            rec.extend(items)
            if outputs:
                rec.made(outputs)
            return
        with self.lock:
            pending = self._pending_list()
            pending.check_device(items)  # now, not at the flush: the error belongs to this call
            pending.extend(items)
            if len(pending.items) >= PENDING_ITEMS:
                self.flush()

    def template_scratch(self, specs: tuple) -> list:
        """Scratch tensors for a repeated op call whose template needs `specs` ((TensorSpec, label) each:
        OpTemplate.scratch), shared with the other calls of the same specs in the command list the call joins
        (the open recording or the pending list: CommandList.scratch)."""
        rec = self.recording
        with self.lock:
            commands = rec.commands if rec is not None else self._pending_list()
            got = commands.scratch.get(specs)
            if got is None:  # a tensor per position: one call's scratch never aliases itself
                got = commands.scratch[specs] = [self.empty(s.shape, s.dtype, label) for s, label in specs]
            return got

    def _pending_list(self) -> CommandList:
        """The pending list of immediate ops, made when the first op joins it (call with the lock held)."""
        if self._pending is None:
            self._pending = CommandList(self, label="wgraph.immediate")
        return self._pending

    def flush(self) -> None:
        """Submit the pending immediate ops now (one submit; nothing when none wait). Every readback, fence,
        recording, program run and queue write does this first, so results and order never depend on it;
        call it to start the GPU on queued work before doing something else on the host."""
        with self.lock:
            pending, self._pending = self._pending, None
            if pending is not None:
                pending.submit()

    def take_pending(self) -> list:
        """The pending immediate ops' items, removed from the device (a recording submits them at its front,
        in its one submit). Call with the lock held."""
        pending, self._pending = self._pending, None
        return [] if pending is None else pending.items

    @property
    def pending(self) -> tuple:
        """The items (Dispatch, Copy, Write) of immediate ops waiting for the next flush, in order."""
        pending = self._pending
        return () if pending is None else tuple(pending.items)

    def submit(self, command_buffer):
        """Submit one finished command buffer (the end of CommandList's path) and count it. The caller
        flushed the pending ops first (PreparedCommands.submit), so submissions keep the order of the calls."""
        self._last_index = submit_for_index(self.wgpu.queue, command_buffer)
        self._serial += 1
        self.stats.submits += 1

    def fence(self) -> int:
        """A token for all work submitted so far (pending immediate ops are submitted first); `wait(fence)`
        blocks until the GPU has done it (no readback)."""
        self.flush()
        return self._last_index

    def wait(self, fence: int) -> None:
        """Block until the submissions up to `fence` (from `dev.fence()`) have finished on the GPU."""
        self.check_alive()
        if fence <= 0:
            return  # nothing was submitted
        if fence > self._last_index:  # wgpu-native panics on an index it has not issued
            raise DeviceError(f"fence {fence} was never issued on this device (its last is {self._last_index})")
        wait_for_index(self.wgpu, fence)
        self.stats.gpu_waits += 1

    def read(self, tensor: Tensor) -> np.ndarray:
        """Download a tensor through the device's reused MAP_READ staging buffer."""
        self.check_tensor(tensor)
        rec = self.recording
        if rec is not None and rec.writes(tensor):
            raise RecordingError(f"{tensor!r} is written by the open recording; read it after the recording submits")
        info = dtype_info(tensor.dtype)
        nbytes = align4(tensor.nbytes)
        if nbytes == 0:
            return np.zeros(tensor.shape, info.host)
        with self.lock:
            self.check_tensor(tensor)
            data, error = self._read_locked(tensor.buffer, nbytes)
        if error is not None:
            raise error
        stored = np.frombuffer(data, info.numpy, count=tensor.size).reshape(tensor.shape)
        return from_bf16(stored) if tensor.dtype == "bf16" else stored.copy()  # bf16 reads back as float32

    def _read_locked(self, buffer, nbytes: int, check_flag: bool = True) -> tuple[bytes, Exception | None]:
        """The buffer's bytes, and the error the device error flag held (cleared), read in the same submit."""
        self.flush()
        flag = self._error_flag if check_flag else None
        total = nbytes + (device_errors.FLAG_BYTES if flag is not None else 0)
        if self._staging is None or self._staging.size < total:
            size = max(256, 1 << (total - 1).bit_length())
            self._staging = self.wgpu.create_buffer(
                size=size, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST, label="wgraph.staging"
            )
            self.stats.staging_buffers_created += 1
        encoder = self.wgpu.create_command_encoder(label="wgraph.readback")
        encoder.copy_buffer_to_buffer(buffer, 0, self._staging, 0, nbytes)
        if flag is not None:
            encoder.copy_buffer_to_buffer(flag.buffer, 0, self._staging, nbytes, device_errors.FLAG_BYTES)
        self.submit(encoder.finish())
        self._staging.map_sync(wgpu.MapMode.READ, 0, total)
        data = self._staging.read_mapped(0, total, copy=True)
        self._staging.unmap()
        error = None
        if flag is not None:
            error = device_errors.decode(bytes(data[nbytes:]))
            if error is not None:
                self.wgpu.queue.write_buffer(flag.buffer, 0, bytes(device_errors.FLAG_BYTES))
            data = data[:nbytes]
        self._completed = self._serial  # the map waited for every earlier submission
        self.pool.collect(self._completed)
        self.stats.readbacks += 1
        return data, error

    def sync(self):
        """Wait until the GPU has finished everything submitted so far (a readback of a small tensor)."""
        self.read(self.fallback("sync"))

    def wait_idle(self):
        """Wait for the GPU and destroy the buffers that waited for it (the pool's deferred destruction)."""
        with self.lock:
            self.check_alive()
            if self._idle_probe is None:  # not pooled: waiting must never allocate from the pool it frees
                self._idle_probe = self.wgpu.create_buffer(size=4, usage=wgpu.BufferUsage.COPY_SRC, label="wgraph.idle")
            self._read_locked(self._idle_probe, 4, check_flag=False)  # the flag waits for a readback
            self.stats.readbacks -= 1
            self.stats.gpu_waits += 1

    def __repr__(self) -> str:
        return f"Device({self.caps.adapter_name!r}, epoch={self.epoch})"


@attrs.frozen
class UniformBuffer:
    """A uniform buffer lent to a command list; `release()` gives it back (a no-op for a cached one)."""

    buffer: object
    _release: object = None

    def release(self):
        if self._release is not None:
            self._release(self.buffer)


_default: Device | None = None
_default_lock = threading.Lock()


def default_device() -> Device:
    """The process-wide device, created on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Device()
        return _default

