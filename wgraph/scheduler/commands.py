"""The one path from op calls to `queue.submit`: a `CommandList` of items (Dispatch, Copy, Write) and one
uniform arena, prepared (pipelines, bind groups, the arena in a GPU buffer) and encoded into one command
encoder, where consecutive dispatches share one compute pass.

Op calls join a list through `CommandList.call` (their template filled with the call's tensors and the list's
scratch): the scheduler's pending list of immediate ops, a `Recording`, or a `Program`'s list, which keeps it
prepared and replays it, patching only input buffers and dirty uniform bytes. A list takes everything it needs
from its scheduler (scheduler/queue.py): caches, uniform buffers, the queue."""

from __future__ import annotations

from wgraph.errors import DeviceError
from wgraph.kernels.uniforms import UniformArena
from wgraph.scheduler import native
from wgraph.scheduler.dispatch import Copy, Dispatch, Write
from wgraph.scheduler.scratch import ScratchSpace


def align4(n: int) -> int:
    return -(-n // 4) * 4


class Step(tuple):
    """A dispatch resolved for encoding: (dispatch, pipeline, bind group, dynamic uniform offsets as a native
    uint32 array, their count). A tuple: a recording makes one per dispatch, and the encode loop unpacks it.
    It holds the wgpu-py pipeline and bind group, which keep their native handles alive."""

    __slots__ = ()

    def __new__(cls, dispatch: Dispatch, pipeline, bind_group, offsets, n_offsets: int):
        return tuple.__new__(cls, (dispatch, pipeline, bind_group, offsets, n_offsets))

    @property
    def dispatch(self) -> Dispatch:
        return self[0]


class CommandList:
    """Items in submission order. `submit()` sends them in one `queue.submit`; `prepare()` resolves them once
    for a caller that replays them (a Program)."""

    def __init__(self, scheduler, label: str = "wgraph"):
        self.scheduler = scheduler
        self.label = label
        self.items: list = []
        self._scratch: ScratchSpace | None = None

    @property
    def scratch(self) -> ScratchSpace:
        """The scratch its op calls share (scheduler/scratch.py); freed with the list, so memory is bounded by
        one list (a per-template cache would grow with the shapes a workload goes through)."""
        if self._scratch is None:
            self._scratch = ScratchSpace(self.scheduler.empty, self.label)
        return self._scratch

    def call(self, template, inputs, outputs) -> None:
        """Append an op call: its template's dispatches filled with the call's tensors and this list's scratch
        (the one form every op call and Program node takes: scheduler/templates.py)."""
        scratch = self.scratch.place(template.scratch) if template.scratch else ()
        self.items.extend(template.instantiate(inputs, outputs, scratch))

    def append(self, item) -> None:
        self.items.append(item)

    def extend(self, items) -> None:
        self.items.extend(items)

    def writes(self, tensor) -> bool:
        """Whether an item of this list writes `tensor`'s buffer."""
        return any(t.buffer is tensor.buffer for item in self.items for t in item.writes())

    def poison_writes(self, reason: str, keep) -> None:
        """Mark every tensor an item writes unusable (the list will never run), but those whose buffer id is in
        `keep` (the device's own: the error flag, fallbacks)."""
        for item in self.items:
            for t in item.writes():
                if id(t.buffer) not in keep:
                    t.poison(reason)

    def check_device(self) -> None:
        """DeviceError unless every item of this list was made on this device in its current epoch (an item's
        first tensor stands for all: ctx.dispatch checked them together; dev.run's items were checked whole by
        Scheduler.check_captured). Epochs are numbered across devices, so the epoch names the device too."""
        epoch = self.scheduler.epoch
        for item in self.items:
            t = item.tensors[0] if item.tensors else None
            if t is not None and getattr(t.buffer, "_wgraph_epoch", None) != epoch:
                raise DeviceError(
                    f"{item.label}: a captured item of another device or of epoch "
                    f"{getattr(t.buffer, '_wgraph_epoch', None)} (the device is now epoch {epoch}); "
                    f"capture it again after dev.recreate()")

    def prepare(self, persistent: bool = False) -> PreparedCommands:
        """Resolve every item (call with the device lock held). `persistent`: the arena gets its own buffer
        and no two dispatches share a uniform slice, so one dispatch's uniforms can be patched later."""
        return PreparedCommands(self.scheduler, self.items, self.label, persistent)

    def submit(self, timestamps=None) -> None:
        """Encode every item into one encoder and submit it once (nothing at all for an empty list)."""
        scheduler = self.scheduler
        scheduler.check_open()
        self.check_device()
        if not self.items:
            return
        with scheduler.lock:
            scheduler.check_open()
            prepared = self.prepare()
            try:
                prepared.submit(timestamps=timestamps)
            finally:
                prepared.release()


class PreparedCommands:
    """A command list ready to encode: the uniform arena in a GPU buffer, a Step per dispatch, and the bytes
    of every Write after the first dispatch staged in upload tensors (as few as the device's tensor size limit
    allows: a recording may write more than one tensor can hold) copied at its place in the order."""

    def __init__(self, scheduler, items, label: str, persistent: bool):
        self.scheduler = scheduler
        self.label = label
        arena = UniformArena(scheduler.uniform_alignment, share=not persistent)
        self.offsets = [arena.add(i.uniforms) if isinstance(i, Dispatch) and i.kernel.uniform else None
                        for i in items]
        self.arena = bytearray(arena.data)
        self._uploaded = bytes(self.arena)
        # a persistent list (a Program's) is encoded on every replay: its steps as encode_passes takes them,
        # built on the first submit; a one-shot list is encoded once, straight from its steps
        self.persistent = persistent
        self._passes: list | None = None
        self._uniforms = scheduler.uniform_buffer(self._uploaded, persistent, arena.slices) if self.arena else None
        try:
            self._resolve(items, self._uniforms.buffer if self._uniforms is not None else None)
        except BaseException:   # an upload buffer past the memory, a kernel the driver cannot compile
            self.release()      # a pool buffer nothing else holds: back to the pool, else lost to it for good
            raise

    def _resolve(self, items, uniform_buffer) -> None:
        """Stage the writes after the first GPU item in upload tensors; a Step per dispatch (pipeline, bind group)."""
        scheduler, label = self.scheduler, self.label
        self.head_writes: list[Write] = []  # writes before the first GPU item: plain queue writes
        groups: list[list[Write]] = []  # the staged writes of each upload tensor
        group_bytes = 0
        gpu_item_seen = False
        for item in items:
            if not isinstance(item, Write):
                gpu_item_seen = True
            elif not gpu_item_seen:
                self.head_writes.append(item)
            else:
                # a Write is at most its destination tensor's bytes, so within the limit by itself
                if not groups or group_bytes + len(item.data) > scheduler.max_tensor_bytes:
                    groups.append([])
                    group_bytes = 0
                groups[-1].append(item)
                group_bytes += len(item.data)
        self._uploads: list[tuple] = []  # (upload tensor, its bytes)
        staged_at: dict[int, tuple] = {}  # id(write) -> (its upload tensor, offset there)
        for n, group in enumerate(groups):
            data = b"".join(w.data for w in group)
            upload = scheduler.empty((len(data) // 4,), "u32", f"{label}.upload{n or ''}")
            self._uploads.append((upload, data))
            offset = 0
            for w in group:
                staged_at[id(w)] = (upload, offset)
                offset += len(w.data)
        self.steps: list = []
        # a list repeats few (kernel, buffers) pairs (a recorded loop): look each up in the device caches once;
        # the kernels not compiled yet are compiled side by side first (a new model step's dozens)
        scheduler.pipelines.warm({id(item.kernel): item.kernel for item in items if type(item) is Dispatch}.values())
        pipelines, groups, offset_arrays = {}, {}, {None: native.NO_OFFSETS}
        for item, off in zip(items, self.offsets):
            if type(item) is Dispatch:
                k = item.kernel
                got = pipelines.get(id(k))  # by identity: kernels are the registry's own objects
                if got is None:
                    got = pipelines[id(k)] = scheduler.pipelines.get(k)
                key = (id(k), item.tensors)
                group = groups.get(key)
                if group is None:
                    group = groups[key] = scheduler.bind_groups.get(k, got[1], uniform_buffer, item.tensors)
                c_off = offset_arrays.get(off)
                if c_off is None:
                    c_off = offset_arrays[off] = native.offsets_array([off])
                self.steps.append(Step(item, got[0], group, c_off, 0 if off is None else 1))
            elif isinstance(item, Write):
                if id(item) in staged_at:
                    upload, offset = staged_at[id(item)]
                    self.steps.append(Copy(upload, item.dst, len(item.data), src_offset=offset, label=item.label))
            else:
                self.steps.append(item)

    @property
    def uniform_bytes(self) -> int:
        return len(self.arena)

    def set_uniforms(self, index: int, data: bytes) -> None:
        """Replace item `index`'s uniform bytes (same length); the next submit uploads the dirty range."""
        off = self.offsets[index]
        self.arena[off:off + len(data)] = data

    def replace_step(self, index: int, dispatch: Dispatch) -> None:
        """Item `index` dispatches as `dispatch` (the same kernel: its pipeline and uniform slice), bound to
        `dispatch`'s tensors (a bind group from the cache: the same one while they are the same buffers)."""
        _, pipeline, _group, offsets, n_offsets = self.steps[index]
        k = dispatch.kernel
        bgl = self.scheduler.pipelines.get(k)[1]
        uniform_buffer = self._uniforms.buffer if self._uniforms is not None else None
        group = self.scheduler.bind_groups.get(k, bgl, uniform_buffer, dispatch.tensors)
        self.steps[index] = Step(dispatch, pipeline, group, offsets, n_offsets)
        self._passes = None

    def _flush_uniforms(self) -> None:
        """Write the one byte range of the arena that changed since the last upload (nothing when clean)."""
        now = bytes(self.arena)
        if now == self._uploaded:
            return
        old = self._uploaded
        lo = next(i for i in range(len(now)) if now[i] != old[i]) // 4 * 4
        hi = align4(max(i for i in range(len(now)) if now[i] != old[i]) + 1)
        self.scheduler.write_buffer(self._uniforms.buffer, lo, now[lo:hi])
        self.scheduler.stats.uniform_bytes_written += hi - lo
        self._uploaded = now

    def submit(self, head=(), timestamps=None, repeats: int = 1) -> None:
        """Queue the writes, encode `head` items (a Program's input copies) then every step, `repeats` times
        over (a persistent list without head writes or timestamps), submit once. The scheduler submits
        pending immediate ops first (their own submit), so the queue sees every call in order."""
        scheduler = self.scheduler
        for w in self.head_writes:
            scheduler.write_buffer(w.dst.buffer, 0, w.data)
        for upload, data in self._uploads:
            scheduler.write_buffer(upload.buffer, 0, data)
        if self._uniforms is not None:
            self._flush_uniforms()
        if not self.steps and not head:
            return
        # No wgpu labels on the encoder or its passes: each one is a string wgpu-py converts and the driver
        # may attach as a debug label on every submit (an immediate op pays it per call); our own labels
        # (item.label) still name dispatches in profiles and errors.
        encoder = scheduler.gpu.create_command_encoder()
        if timestamps is None and self.persistent:
            if self._passes is None:
                self._passes = native_passes(self.steps)
            passes = list(head) + self._passes if head else self._passes
            for _ in range(repeats):
                encode_passes(scheduler.stats, encoder, passes)
        else:
            if repeats != 1:
                raise ValueError("only a persistent list without timestamps encodes repeats")
            encode_steps(scheduler.stats, encoder, list(head) + self.steps if head else self.steps, timestamps)
            if timestamps is not None:
                timestamps.finish(encoder)
        scheduler.submit(encoder.finish())

    def release(self) -> None:
        """Give the uniform buffer back (its reuse is queue-ordered after this list's work)."""
        if self._uniforms is not None:
            self._uniforms.release()
            self._uniforms = None
        self._uploads = []


def native_passes(steps) -> list:
    """`steps` as encode_passes takes them: each Copy as it is, each run of dispatches between copies as one list
    of native arguments (pipeline handle, or None where the pass already has that pipeline; bind group handle;
    dynamic offsets; workgroup counts (None when indirect); indirect (buffer handle, offset) or None). A
    persistent list (a Program's) is encoded on every replay: what can be looked up once is looked up here
    (replace_step rebuilds it)."""
    out: list = []
    run: list | None = None
    current = None
    for step in steps:
        if isinstance(step, Copy):
            out.append(step)
            run = None
            continue
        item, pipeline, group, offsets, n_offsets = step
        if run is None:
            run, current = [], None
            out.append(run)
        indirect = None
        if item.indirect is not None:
            args, args_offset = item.indirect
            indirect = (args.buffer._internal, args_offset)
        run.append((None if pipeline is current else pipeline._internal, group._internal, n_offsets, offsets,
                    item.workgroups, indirect))
        current = pipeline
    return out


def encode_passes(stats, encoder, passes) -> None:
    """Encode native_passes' output (and Copies): one compute pass per run of dispatches. The host cost of a
    replay is this loop: three native calls per dispatch and nothing else to look up."""
    set_pipeline, set_bind_group = native.set_pipeline, native.set_bind_group
    dispatch_workgroups, dispatch_indirect = native.dispatch_workgroups, native.dispatch_workgroups_indirect
    n_dispatch = n_pass = 0
    for run in passes:
        if type(run) is not list:
            encoder.copy_buffer_to_buffer(run.src.buffer, run.src_offset, run.dst.buffer, run.dst_offset,
                                          align4(run.nbytes))
            stats.copies += 1
            continue
        compute_pass = encoder.begin_compute_pass()
        handle = compute_pass._internal
        for pipeline, group, n_offsets, offsets, workgroups, indirect in run:
            if pipeline is not None:
                set_pipeline(handle, pipeline)
            set_bind_group(handle, 0, group, n_offsets, offsets)
            if indirect is None:
                dispatch_workgroups(handle, *workgroups)
            else:
                dispatch_indirect(handle, *indirect)
        compute_pass.end()
        n_dispatch += len(run)
        n_pass += 1
    stats.dispatches += n_dispatch
    stats.compute_passes += n_pass


def encode_steps(stats, encoder, steps, timestamps=None) -> None:
    """Encode Steps and Copies into `encoder`; consecutive dispatches share a compute pass."""
    # This loop is the host cost of a recorded op (a one-shot list: building native_passes first would cost it
    # a second loop) and of a profiled replay: only native calls (scheduler/native.py) and a few lookups. set_pipeline is skipped while the pass already has that pipeline (WebGPU keeps it across
    # dispatches). Passes begin and end through wgpu-py, which raises any error the pass commands made.
    set_pipeline, set_bind_group = native.set_pipeline, native.set_bind_group
    dispatch_workgroups, dispatch_indirect = native.dispatch_workgroups, native.dispatch_workgroups_indirect
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
            encoder.copy_buffer_to_buffer(step.src.buffer, step.src_offset, step.dst.buffer, step.dst_offset,
                                          align4(step.nbytes))
            stats.copies += 1
            continue
        item, pipeline, group, offsets, n_offsets = step
        if compute_pass is None or per_pass_stamps:
            if compute_pass is not None:
                compute_pass.end()
            writes = None
            if per_pass_stamps:
                query_set, index = timestamps.slot(n_dispatch)
                writes = {"query_set": query_set, "beginning_of_pass_write_index": index,
                          "end_of_pass_write_index": index + 1}
            compute_pass = encoder.begin_compute_pass(timestamp_writes=writes)
            pass_handle = compute_pass._internal
            current_pipeline = None
            stats.compute_passes += 1
        if pipeline is not current_pipeline:
            set_pipeline(pass_handle, pipeline._internal)
            current_pipeline = pipeline
        set_bind_group(pass_handle, 0, group._internal, n_offsets, offsets)
        if inside_stamps:
            query_set, index = timestamps.slot(n_dispatch)
            compute_pass._write_timestamp(query_set, index)
        if item.indirect is not None:
            args, args_offset = item.indirect
            dispatch_indirect(pass_handle, args.buffer._internal, args_offset)
        else:
            dispatch_workgroups(pass_handle, *item.workgroups)
        if inside_stamps:
            compute_pass._write_timestamp(query_set, index + 1)
        n_dispatch += 1
    stats.dispatches += n_dispatch
    if compute_pass is not None:
        compute_pass.end()
