"""The device: adapter choice, features and limits (`Caps`), counters (`Stats`), allocation (the buffer pool),
upload and readback. When work reaches the GPU is the scheduler's (`dev.scheduler`, scheduler/queue.py): the
device hands it op calls, writes, flushes and fences."""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections import deque
from typing import Any

import attrs
import numpy as np
import wgpu

from wgraph import args, device_errors, process_setup
from wgraph.api_types import DTypeLike, HostData, Shape
from wgraph.dtypes import dtype_info, dtype_of_numpy, from_bf16
from wgraph.errors import DeviceError, LimitError, RecordingError, ShapeError, UnsupportedError
from wgraph.host_arrays import host_array
from wgraph.kernels.pipelines import BindGroupCache, PipelineCache
from wgraph.kernels.registry import KNOWN_FEATURES
from wgraph.scheduler.commands import align4
from wgraph.scheduler.pool import TENSOR_USAGE, UNIFORM_USAGE, BufferPool
from wgraph.scheduler.queue import Scheduler
from wgraph.scheduler.recording import Recording
from wgraph.scheduler.templates import TemplateCache
from wgraph.tensor import Tensor, TensorSpec

__all__ = ["Caps", "Device", "Stats", "TENSOR_USAGE", "UNIFORM_USAGE", "alloc", "default_device"]

log = logging.getLogger(__name__)
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
    # storage bindings a kernel may have (ours take 1 to 13; a kernel past the device's limit is refused by name,
    # not left to wgpu's validation). WebGPU's default is 8; native adapters usually offer more (lavapipe 32)
    max_storage_buffers_per_stage: int = 16

    @classmethod
    def synthetic(cls, **facts) -> Caps:
        """Caps for planner tests: WebGPU's default limits unless `facts` say otherwise (storage buffers per stage:
        16, where WebGPU's default 8 is below what the batched attention kernels bind)."""
        return cls(adapter_name=facts.pop("adapter_name", "synthetic"), **facts)

    @property
    def features(self) -> frozenset[str]:
        """The WebGPU feature names the device has, of shader-f16, subgroup, timestamp-query and
        timestamp-query-inside-passes."""
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
    # waits for the GPU that were not a readback (dev.wait, run_many's window, deferred destruction past its
    # budget); a call with nothing submitted to wait for is not one
    gpu_waits: int = 0

    def snapshot(self) -> Stats:
        """A copy of the counters now (they keep counting): pass it to `since` later."""
        return attrs.evolve(self)

    def since(self, before: Stats) -> Stats:
        """The work done between the snapshot `before` and now: each counter minus its value in `before`."""
        return Stats(**{k: getattr(self, k) - getattr(before, k) for k in attrs.asdict(self)})

    @property
    def live_buffers(self) -> int:
        """GPU buffers created and not yet destroyed."""
        return self.buffers_created - self.buffers_destroyed


def _info_int(info, suffix: str) -> int:
    # wgpu-py 0.32 spells the subgroup size keys "stackgroup_*"; accept either spelling.
    for key in (f"subgroup_{suffix}", f"stackgroup_{suffix}"):
        if info.get(key):
            return int(info[key])
    return 0


def _choose_adapter(power_preference: str):
    process_setup.private_runtime_dir()  # before wgpu's first adapter request starts the Vulkan loader
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


def _log_adapter(caps: Caps, chosen: bool) -> None:
    """INFO: the adapter in use. A CPU adapter the caller did not ask for is a WARNING: results are right but
    100-1000x slower than a GPU, and the usual cause (no Vulkan driver for the GPU, a container without the GPU)
    can be fixed; WGRAPH_ADAPTER=<name> (or Device(adapter=)) says it is meant and makes it INFO."""
    if caps.is_cpu and not chosen:
        log.warning("no GPU adapter found: using %s, a CPU driver (correct, much slower); WGRAPH_ADAPTER=<name> "
                    "picks an adapter", caps.adapter_name)
    else:
        log.info("using adapter %s (%s backend)", caps.adapter_name, caps.backend)


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape without its sizes of 1: (1, 2, 3) and (2, 3, 1) lay data out as (2, 3) does."""
    return tuple(n for n in shape if n != 1)


class Device:
    """A WebGPU device with every feature wgraph can use that the adapter has, at the adapter's limits.

    `epoch` changes whenever the underlying device is replaced; every cache is keyed on it. Epochs are
    numbered across devices, so an epoch names one device too. Most programs use `wg.default_device()`.

    power_preference: "high-performance" or "low-power", WebGPU's adapter preference (ignored with adapter).
    adapter: a wgpu.GPUAdapter to open; None: the preferred adapter for power_preference.
    """

    def __init__(self, power_preference: str = "high-performance", adapter: wgpu.GPUAdapter | None = None) -> None:
        args.choice("Device", "power_preference", power_preference, POWER_PREFERENCES)
        if adapter is not None and not isinstance(adapter, wgpu.GPUAdapter):
            raise args.fail("Device", "adapter", adapter, "None (the preferred adapter) or a wgpu.GPUAdapter")
        self.adapter = adapter or _choose_adapter(power_preference)
        chosen = adapter is not None or bool(os.environ.get("WGRAPH_ADAPTER"))
        self.stats = Stats()
        # One lock serialises everything that touches the wgpu device, the pool, the caches and the counters,
        # so op calls, recordings and programs on several threads are safe (docs/concurrency.md). Re-entrant:
        # a tensor finalizer may run inside a locked call on the same thread.
        self.lock = threading.RLock()
        self._orphans: deque = deque()   # buffers released while the lock was held, for every epoch's pool
        # tensors of this device ever poisoned (Tensor.poison): a Program checks the tensors it binds again only
        # when this moved since it last looked, so a replay's check stays one integer comparison
        self._poisons = 0
        self._open()
        _log_adapter(self.caps, chosen)

    # ---- lifetime ----

    def _open(self):
        old = getattr(self, "scheduler", None)   # a recreate's: each thread's open recordings carry over
        adapter = self.adapter
        features = [f for f in KNOWN_FEATURES if f in adapter.features]
        limits = {k: v for k, v in adapter.limits.items()}
        self.wgpu = adapter.request_device_sync(label="wgraph", required_features=features, required_limits=limits)
        self.epoch = next(_epochs)
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
            max_storage_buffers_per_stage=lim["max-storage-buffers-per-shader-stage"],
        )
        self.pipelines = PipelineCache(self)
        self.bind_groups = BindGroupCache(self)
        self._largest_buffer = self.caps.max_buffer_size // 4 * 4   # in whole words: what a binding may round to
        self.pool = BufferPool(self.wgpu, self.epoch, self.lock, self.stats, self.bind_groups.forget_buffer,
                               max_bytes=self._largest_buffer, orphans=self._orphans)
        self.scheduler = Scheduler(gpu=self.wgpu, epoch=self.epoch, name=self.caps.adapter_name, lock=self.lock,
                                   stats=self.stats, pool=self.pool, pipelines=self.pipelines,
                                   bind_groups=self.bind_groups, empty=self.empty,
                                   max_tensor_bytes=self.caps.max_storage_binding_size,
                                   uniform_alignment=self.caps.min_uniform_offset_alignment,
                                   recordings=old.recordings if old is not None else None)
        self.templates = TemplateCache(self.epoch)  # op templates of this epoch (scheduler/templates.py)
        self._staging = None
        self._fallbacks: dict = {}
        self._error_flag: Tensor | None = None  # made on first use by a kernel that reports (device_errors.py)

    def destroy(self) -> None:
        """Destroy the underlying device (as a device loss does). Every later call raises DeviceError."""
        with self.lock:
            if self.lost:
                return
            # Every cache of the old device dies with it; pooled buffers count as destroyed (live_buffers).
            self.scheduler.close()  # its pending work dies with the device; cached uniform buffers go back
            self.lost = True
            self.wgpu.destroy()
            self.pool.clear()
            self.pipelines.clear()
            self.bind_groups.clear()
            self.templates.clear()
            self._fallbacks.clear()
            self._staging = None
            self._error_flag = None
        self.pool.take_orphans()   # released on other threads while this held the lock: counted destroyed

    def recreate(self) -> None:
        """Replace a lost device with a new one: a new epoch, and every cache, buffer and tensor of the old
        one invalid (using an old tensor raises DeviceError). Refused (RecordingError naming it) inside a
        `with dev.record():` block of this thread: its ops are recorded for the device being replaced, so leave
        the block first. A recording open on another thread raises DeviceError at its next op call or write."""
        rec = self.scheduler.recording
        if rec is not None:
            raise RecordingError(f"dev.recreate() inside {rec.label}, open on this thread: its ops are recorded for "
                                 f"the device (epoch {self.epoch}) that recreate would replace; leave the "
                                 f"`with dev.record()` block first (it submits, or an exception discards it)")
        with self.lock:
            if not self.lost:
                self.destroy()
            self._open()
        self.pool.take_orphans()

    def check_alive(self) -> None:
        """DeviceError if the device is lost or destroyed (dev.recreate() replaces it)."""
        if self.lost:
            raise DeviceError(
                f"device {self.caps.adapter_name!r} (epoch {self.epoch}) is lost or destroyed; call dev.recreate()"
            )

    def check_tensor(self, tensor: Tensor, where: str = "device") -> None:
        """DeviceError unless `tensor` lives on this device in its current epoch (ShapeError naming `where` when
        it is not a Tensor at all; RecordingError when it is poisoned).

        tensor: the tensor to check. where: the caller's name, for the message."""
        if not isinstance(tensor, Tensor):
            raise ShapeError(f"{where}: tensor must be a wgraph Tensor, got {type(tensor).__name__}")
        self.check_alive()
        if tensor.device is not self:
            raise DeviceError(f"{tensor!r} belongs to another device ({tensor.device.caps.adapter_name!r})")
        if getattr(tensor.buffer, "_wgraph_epoch", None) != self.epoch:
            raise DeviceError(f"{tensor!r} was made before the device was re-created (epoch changed)")
        poison = tensor.poisoned
        if poison is not None:
            raise RecordingError(f"{tensor!r}: {poison}")

    # ---- allocation, upload, readback ----

    def empty(self, shape: Shape, dtype: DTypeLike = "f32", label: str = "") -> Tensor:
        """A tensor with uninitialised contents (pooled storage).

        shape: a tuple of integers.
        dtype: wgraph's name ("f32", "f16", "bf16", "i32", "u32") or numpy's or torch's spelling of one (np.float16,
            "float32", torch.bfloat16).
        label: a name for the buffer (in wgpu's messages and in repr).
        """
        spec = TensorSpec(args.shape("dev.empty", "shape", shape), args.dtype_name("dev.empty", "dtype", dtype))
        return alloc(self, spec, args.text("dev.empty", "label", label))

    def tensor(self, array: HostData, dtype: DTypeLike | None = None, label: str = "") -> Tensor:
        """Upload host data (f32, f16, bf16, u32, i32; host_arrays.py: array-likes, dtype= converts, 0-d stays
        0-d; dtype="bf16" rounds to nearest even, dtypes.py; int8/uint8 data packed with dtypes.pack_bytes_u32).

        array: host data: a numpy array of a wgraph dtype (float32, float16, int32, uint32), anything numpy can view
            (a memoryview, a CPU torch tensor), or Python numbers / lists with dtype= (numpy would make them float64 /
            int64, which wgraph lacks).
        dtype: None (the array's own), or the dtype to convert to, checked: wgraph's name or numpy's or torch's
            spelling of one (np.float32, "float32", torch.float16, "bfloat16").
        label: a name for the buffer.
        """
        dtype = args.optional_dtype_name("dev.tensor", "dtype", dtype)
        label = args.text("dev.tensor", "label", label)
        data = host_array(array, dtype, convert=True, where="dev.tensor")
        dtype = dtype_of_numpy(data.dtype)
        if dtype == "f16" and not self.caps.has_f16:
            raise UnsupportedError(f"dtype f16 needs the shader-f16 feature, which {self.caps.adapter_name!r} lacks")
        t = self.empty(data.shape, dtype, label)
        self.write(t, data)
        rec = self.scheduler.recording
        if rec is not None:   # its upload is an item of the recording: discarded with it, the tensor is unusable
            rec.made([t])
        return t

    def write(self, tensor: Tensor, array: HostData) -> None:
        """Overwrite a tensor's contents from host data of its dtype and size (host_arrays.py). The write
        keeps its place among the op calls around it, as on a stream: inside a recording it is an item of the
        recording; while immediate ops are pending it joins them; else it is queued now.

        tensor: the tensor to overwrite (of this device).
        array: host data of the tensor's dtype and shape (sizes of 1 aside), or flat data of its size filled in
            order (Python numbers and lists take the tensor's dtype).
        """
        self.check_tensor(tensor, "dev.write")
        if tensor.ends_mid_word:
            raise ShapeError(f"dev.write into {tensor!r}: the view ends inside a 4-byte word of its buffer, which also "
                             f"holds the element after it; writes go in whole words, so this one would overwrite the "
                             f"element after it: write the whole tensor, or a view of an even number of "
                             f"{tensor.dtype} elements")
        data = host_array(array, tensor.dtype, where=f"dev.write into {tensor!r}")
        if data.size != tensor.size:
            raise ShapeError(f"dev.write into {tensor!r}: data of shape {data.shape} has {data.size} elements, the "
                             f"tensor {tensor.size}")
        if data.ndim > 1 and _squeezed(data.shape) != _squeezed(tensor.shape):
            # a (3, 2) array into a (2, 3) tensor (a transpose forgotten) has the right count and the wrong layout
            raise ShapeError(f"dev.write into {tensor!r}: data of shape {data.shape} is laid out otherwise; give "
                             f"the tensor's shape {tensor.shape} (or flat data, data.reshape(-1), to fill it in order)")
        raw = data.tobytes()
        if len(raw) % 4:
            raw += b"\0" * (4 - len(raw) % 4)
        if raw:
            self.scheduler.write(tensor, raw)

    def read(self, tensor: Tensor) -> np.ndarray:
        """Download a tensor through the device's reused MAP_READ staging buffer. The device error flag is
        read in the same submit: a kernel's report since the last check raises here (and is cleared).

        tensor: the tensor to read (of this device; not one the open recording writes).
        """
        self.check_tensor(tensor, "dev.read")
        scheduler = self.scheduler
        rec = scheduler.recording
        if rec is not None and rec.writes(tensor):
            raise RecordingError(f"{tensor!r} is written by the open recording; read it after the recording submits")
        info = dtype_info(tensor.dtype)
        nbytes = align4(tensor.nbytes)
        if nbytes == 0:
            return np.zeros(tensor.shape, info.host)
        with self.lock:
            self.check_tensor(tensor)
            flag = self._error_flag
            largest = self._largest_buffer
            # a tensor within 16 bytes of max-buffer-size leaves no room for the flag beside it: read by itself next
            flag_apart = flag is not None and nbytes + device_errors.FLAG_BYTES > largest
            if flag_apart:
                flag = None
            total = nbytes + (device_errors.FLAG_BYTES if flag is not None else 0)
            if self._staging is None or self._staging.size < total:
                # a power of two, reused by smaller reads, but never past max-buffer-size (which need not be one)
                size = min(max(256, 1 << (total - 1).bit_length()), largest)
                self._staging = self.wgpu.create_buffer(
                    size=size, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST, label="wgraph.staging")
                self.stats.staging_buffers_created += 1
            scheduler.flush()
            encoder = self.wgpu.create_command_encoder(label="wgraph.readback")
            encoder.copy_buffer_to_buffer(tensor.buffer, 0, self._staging, 0, nbytes)
            if flag is not None:
                encoder.copy_buffer_to_buffer(flag.buffer, 0, self._staging, nbytes, device_errors.FLAG_BYTES)
            index = scheduler.submit(encoder.finish())
            self._staging.map_sync(wgpu.MapMode.READ, 0, total)
            data = self._staging.read_mapped(0, total, copy=True)
            self._staging.unmap()
            scheduler.completed(index)  # the map waited for every submission up to this one
            self.stats.readbacks += 1
            error = None
            if flag is not None:
                error = device_errors.decode(bytes(data[nbytes:]))
                if error is not None:
                    scheduler.write_buffer(flag.buffer, 0, bytes(device_errors.FLAG_BYTES))
                data = data[:nbytes]
            elif flag_apart:
                self.read(self._error_flag)  # under the lock: nothing is submitted between the two readbacks
        if error is not None:
            raise error
        stored = np.frombuffer(data, info.numpy, count=tensor.size).reshape(tensor.shape)
        return from_bf16(stored) if tensor.dtype == "bf16" else stored.copy()  # bf16 reads back as float32

    def fallback(self, name: str, nbytes: int = 4) -> Tensor:
        """A small zero-filled tensor bound where a kernel's optional input is absent, one per epoch.

        name: which binding it stands in for (one tensor per name and size).
        nbytes: its size in bytes.
        """
        key = (name, nbytes, self.epoch)
        t = self._fallbacks.get(key)
        if t is None:
            with self.lock:
                t = self._fallbacks.get(key)
                if t is None:
                    t = owned(self, np.zeros(nbytes // 4, np.uint32), f"fallback.{name}")
                    self._fallbacks[key] = t
        return t

    def error_flag(self) -> Tensor:
        """The device error flag that kernels checking GPU-resident values bind (wgraph/device_errors.py)."""
        flag = self._error_flag
        if flag is not None:
            return flag  # every attention dispatch asks: no lock once it exists
        with self.lock:
            if self._error_flag is None:
                self._error_flag = owned(self, np.zeros(device_errors.FLAG_WORDS, np.uint32), "device_errors")
            return self._error_flag

    def check_errors(self) -> None:
        """Wait for the GPU, then raise GpuValueError (and clear the flag) if a kernel reported a GPU value out
        of range since the last check or readback. Every readback checks too."""
        self.check_alive()   # a destroyed device has no flag left: "no error" would be a guess
        if self._error_flag is not None:
            rec = self.scheduler.recording
            if rec is not None and rec.writes(self._error_flag):
                raise RecordingError("dev.check_errors() inside a recording whose ops report into the device error "
                                     "flag: they run when it submits; check after the `with dev.record()` block")
            self.read(self._error_flag)

    def sync(self) -> None:
        """Wait until the GPU has finished everything submitted so far (a readback of a small tensor)."""
        self.read(self.fallback("sync"))

    # ---- submission: the scheduler's (scheduler/queue.py) ----

    def record(self, profile: bool = False, label: str | None = None) -> Recording:
        """A recording: `with dev.record() as rec:` makes op calls and writes on this thread append instead
        of submit. `label` names it in errors (default "recording #n"). Its ops belong to this epoch of the
        device: dev.recreate() inside the block is refused (RecordingError naming it); a recreate on another
        thread makes the block's next op call or write raise DeviceError.

        profile: time each pass with timestamp queries (read with rec.profile()).
        label: the recording's name in errors; None: "recording #n".
        """
        args.flag("dev.record", "profile", profile)
        if label is not None:
            label = args.text("dev.record", "label", label)
        self.check_alive()
        return Recording(self.scheduler, self.caps, profile=profile, label=label)

    def run(self, items: Any, outputs: tuple = ()) -> None:
        """Captured items (Dispatch, Copy, Write): appended to the open recording (which remembers `outputs`),
        else to the pending list of immediate ops, submitted when PENDING_ITEMS wait or at the next flush. Every
        tensor of every item is checked first (DeviceError for another device's or an old epoch's, RecordingError
        for an unusable one), naming the item and the binding.

        items: a list of the captured Dispatch / Copy / Write items.
        outputs: the tensors the items write (a recording keeps them).
        """
        self.check_alive()
        self.scheduler.run(items, outputs)

    def flush(self) -> None:
        """Submit the pending immediate ops now (one submit; nothing when none wait). Every readback, fence,
        recording, program run and queue write does this first, so results and order never depend on it;
        call it to start the GPU on queued work before doing something else on the host."""
        self.scheduler.flush()

    def fence(self) -> int:
        """A token for all work submitted so far (pending immediate ops are submitted first); `wait(fence)`
        blocks until the GPU has done it (no readback)."""
        return self.scheduler.fence()

    def wait(self, fence: int) -> None:
        """Block until the submissions up to `fence` (from `dev.fence()`) have finished on the GPU.

        fence: a token from dev.fence().
        """
        fence = args.integer("dev.wait", "fence", fence, 0, 2**64 - 1)
        self.check_alive()
        self.scheduler.wait(fence)

    def __repr__(self) -> str:
        return f"Device({self.caps.adapter_name!r}, epoch={self.epoch})"


def alloc(device: Device, spec: TensorSpec, label: str = "") -> Tensor:
    """dev.empty of a TensorSpec an op already made (an output, scratch): no argument to check again, which an op
    call that allocates its output would pay on every call. (A function, not a method: Device stays small.)"""
    with device.lock:
        # under the lock: a dev.destroy() on another thread that this call waited for closed the pool it would take
        device.check_alive()
        what = f"tensor {spec.shape} {spec.dtype}" + (f" ({label})" if label else "")   # an op's output names it
        if spec.nbytes > device.caps.max_storage_binding_size:
            raise LimitError(
                f"{what} is {spec.nbytes} bytes; the device binds at most "
                f"{device.caps.max_storage_binding_size} bytes per storage buffer"
            )
        if spec.nbytes > device._largest_buffer:  # an adapter may allow smaller buffers than bindings
            raise LimitError(
                f"{what} is {spec.nbytes} bytes; the device makes buffers of at most "
                f"{device.caps.max_buffer_size} bytes (whole 4-byte words: {device._largest_buffer})"
            )
        pool = device.pool
        if pool.deferred_bytes > pool.deferred_budget_bytes and not device.scheduler.appending:
            device.scheduler.wait_idle()  # destroys what waited for the GPU: memory stays bounded
        return Tensor(device, pool.acquire(spec.nbytes, TENSOR_USAGE), spec, label)


def owned(device: Device, words: np.ndarray, label: str) -> Tensor:
    """A device-owned u32 tensor (a fallback, the error flag) holding `words`, written now by a queue write: never
    an item of the recording open on this thread, whose discard would leave it holding a recycled buffer's bytes;
    a failed submit never marks it unusable (Scheduler.owned)."""
    t = alloc(device, TensorSpec(words.shape, "u32"), label)
    with device.lock:
        device.scheduler.write_buffer(t.buffer, 0, words.tobytes())
        device.scheduler.owned.add(id(t.buffer))
    return t


_default: Device | None = None
_default_lock = threading.Lock()


def default_device() -> Device:
    """The process-wide device, created on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Device()
        return _default

