"""`Program`: a graph compiled for one device. Compile plans every node once (dispatches, buffers with
reuse of intermediates whose lives do not overlap, one uniform arena, pipelines and bind groups); `run`
writes the inputs, rewrites only dirty uniform bytes and re-encodes the prepared dispatches in one submit."""

from __future__ import annotations

import weakref

import attrs
import numpy as np

from wgraph.dtypes import as_stored, dtype_info
from wgraph.errors import DeviceError, DtypeError, RecordingError, ShapeError, WgraphError
from wgraph.graph.graph import SOURCE_OPS, Graph, GraphError
from wgraph.ops.core import OPS, EncodeContext
from wgraph.ops.dense import VIEW_OPS
from wgraph.scheduler.batch import align4, encode_prepared, prepare_items
from wgraph.scheduler.dispatch import Copy, Dispatch
from wgraph.scheduler.uniforms import align_up
from wgraph.tensor import Tensor, TensorSpec


@attrs.frozen
class MemoryPlan:
    """Bytes a program holds. `intermediate_bytes` is the peak of the reused buffers; `naive_bytes` what one
    buffer per intermediate value would take."""

    intermediate_buffers: int
    intermediate_bytes: int
    naive_bytes: int
    intermediate_values: int
    persistent_bytes: int
    uniform_bytes: int


@attrs.frozen
class PlanRow:
    """One dispatch of the plan table."""

    node: str
    op: str
    variant: str
    reason: str
    workgroups: str
    uniform_bytes: int
    reads: tuple[str, ...]
    writes: tuple[str, ...]


def _attention_reason(params, specs, caps) -> str:
    from wgraph.ops.attention import plan_facts
    from wgraph.ops.attention_planner import plan

    return plan(plan_facts(params, specs), caps, params.variant).reason


def _linear_reason(params, specs, caps) -> str:
    from wgraph.ops.dense import linear_plan

    return linear_plan(specs).reason


# Ops that can say why their kernel was chosen: op name -> (params, input specs, caps) -> reason.
REASONS = {"attention": _attention_reason, "linear": _linear_reason}


def _reason(node, specs, caps) -> str:
    fn = REASONS.get(node.op)
    if fn is None:
        return ""
    try:
        return fn(node.params, specs, caps)
    except Exception as e:  # the explanation must never break a compiled program
        return f"(no reason: {type(e).__name__})"


def _plan_buffers(g: Graph, order: list[str], persistent: set[str]):
    """Assign every intermediate value (a base value no output or state needs) to a slot. A slot is free for
    node i once every reader of its value (views included) comes before i, so a node never writes a buffer
    it reads. Best fit by size; a free slot too small grows rather than adding a slot."""
    pos = {n: i for i, n in enumerate(order)}
    end: dict[str, int] = {}
    for n in order:
        node = g.node(n)
        for v in node.outputs:
            if g.base[v] == v:
                end[v] = pos[n]
        for v in node.inputs:
            if v is not None:
                b = g.base[v]
                end[b] = max(end.get(b, pos[n]), pos[n])
    slot_of: dict[str, int] = {}
    sizes: list[int] = []
    active: list[tuple[int, int]] = []  # (end, slot)
    free: list[int] = []
    naive = 0
    for i, n in enumerate(order):
        node = g.node(n)
        if node.op in SOURCE_OPS or node.op in VIEW_OPS:
            continue
        free += [s for e, s in active if e < i]
        active = [(e, s) for e, s in active if e >= i]
        for v in node.outputs:
            if v in persistent:
                continue
            need = align4(g.values[v].nbytes)
            naive += need
            fits = [s for s in free if sizes[s] >= need]
            if fits:
                s = min(fits, key=lambda k: (sizes[k], k))
            elif free:
                s = max(free, key=lambda k: (sizes[k], -k))
                sizes[s] = need
            else:
                s = len(sizes)
                sizes.append(need)
            if s in free:
                free.remove(s)
            slot_of[v] = s
            active.append((end[v], s))
    return slot_of, sizes, naive


class Program:
    """A compiled graph. `run(**inputs)` -> {output name: Tensor}; the tensors are the program's own buffers,
    overwritten by the next run (call .numpy() before running again, or copy)."""

    def __init__(self, graph: Graph, device):
        device.check_alive()
        self.graph = graph
        self.device = device
        self.epoch = device.epoch
        self.order = graph.topological_order()
        self.runs = 0
        g = graph
        persistent = set(g.inputs) | set(g.states) | {g.base[v] for v in g.outputs.values()}
        slot_of, slot_sizes, naive = _plan_buffers(g, self.order, persistent)

        # ---- buffers: persistent ones, slots, and a tensor per value (views alias their base) ----
        self.tensors: dict[str, Tensor] = {}
        self._slots = [device.empty((n // 4,), "u32", label=f"{g.name}.slot{i}") for i, n in enumerate(slot_sizes)]
        persistent_bytes = 0
        for n in self.order:
            node = g.node(n)
            for v in node.outputs:
                spec = g.values[v].spec
                if node.op in VIEW_OPS:
                    base = self.tensors[node.inputs[0]]
                    self.tensors[v] = Tensor(device, base.buffer, spec, v, base=base._base or base)
                elif v in slot_of:
                    slot = self._slots[slot_of[v]]
                    self.tensors[v] = Tensor(device, slot.buffer, spec, v, base=slot)
                else:
                    self.tensors[v] = device.empty(spec.shape, spec.dtype, label=v)
                    persistent_bytes += spec.nbytes
        for name, st in g.states.items():
            self._write_state(name, st.init)
        self.memory_plan_slots = dict(slot_of)

        # ---- dispatches: one encode per node, in order ----
        ctx = EncodeContext(device)
        items, owners = [], []
        for n in self.order:
            node = g.node(n)
            if node.op in SOURCE_OPS or node.op in VIEW_OPS:
                continue
            ins = tuple(None if v is None else self.tensors[v] for v in node.inputs)
            outs = tuple(self.tensors[v] for v in node.outputs)
            try:
                made = OPS[node.op].encode(ctx, node.params, ins, outs)
            except WgraphError as e:
                raise type(e)(f"graph {g.name!r}, node {n!r} ({node.op}): {e}") from None
            for d in made:
                items.append(d)
                owners.append(n)
        self._owners = owners

        # ---- one uniform arena for the whole program, uploaded once ----
        align = device.caps.min_uniform_offset_alignment
        offsets, cursor = [], 0
        for d in items:
            if isinstance(d, Dispatch) and d.kernel.uniform is not None:
                cursor = align_up(cursor, align)
                offsets.append(cursor)
                cursor += len(d.uniforms)
            else:
                offsets.append(None)
        self._arena = bytearray(cursor)
        for d, off in zip(items, offsets):
            if off is not None:
                self._arena[off:off + len(d.uniforms)] = d.uniforms
        self._uniform_buffer = device._acquire_uniform(max(16, cursor)) if cursor else None
        if self._uniform_buffer is not None:
            weakref.finalize(self, device._release_uniform, self._uniform_buffer)
            device.wgpu.queue.write_buffer(self._uniform_buffer, 0, bytes(self._arena))
            device.stats.uniform_bytes_written += cursor
        self._uploaded = bytes(self._arena)
        self._offsets = offsets
        slots = [None if off is None else (self._uniform_buffer, off) for off in offsets]

        # ---- pipelines and bind groups, built once and held ----
        self._steps = prepare_items(device, items, slots)

        specs_of = lambda node: tuple(None if v is None else g.values[v].spec for v in node.inputs)  # noqa: E731
        reasons = {n: _reason(g.node(n), specs_of(g.node(n)), device.caps) for n in dict.fromkeys(owners)}
        self.rows = tuple(self._row(d, n, reasons[n]) for d, n in zip(items, owners))
        self.memory = MemoryPlan(len(slot_sizes), sum(slot_sizes), naive, len(slot_of), persistent_bytes, cursor)

    # ---- state ----

    def _write_state(self, name: str, data: bytes | None):
        t = self.tensors[name]
        raw = data if data is not None else bytes(t.nbytes)
        raw = raw + b"\0" * (align4(len(raw)) - len(raw))
        if raw:
            self.device.wgpu.queue.write_buffer(t.buffer, 0, raw)

    def state(self, name: str) -> Tensor:
        """The program's persistent buffer `name` (a state, a const or an input)."""
        if name not in self.graph.states and name not in self.graph.inputs:
            raise GraphError(f"program {self.graph.name!r} has no state {name!r}; states: {sorted(self.graph.states)}")
        return self.tensors[name]

    def reset_state(self, name: str | None = None):
        """Refill one state (or all) with its init data or zeros."""
        for n, st in self.graph.states.items():
            if name is None or n == name:
                self._write_state(n, st.init)

    # ---- running ----

    def _check_device(self):
        dev = self.device
        if dev.lost or dev.epoch != self.epoch:
            raise DeviceError(f"program {self.graph.name!r} was compiled for {dev.caps.adapter_name!r} epoch "
                              f"{self.epoch}; the device is now {'lost' if dev.lost else f'epoch {dev.epoch}'}: "
                              f"compile the graph again")
        if dev.recording is not None:
            raise RecordingError(f"program {self.graph.name!r}: run() inside dev.record() is not supported; "
                                 f"a program submits by itself")

    def _feed(self, name: str, value, spec: TensorSpec):
        """Validate one input; returns ('bytes', raw) or ('copy', tensor). No GPU work."""
        where = f"program {self.graph.name!r}, input {name!r}"
        if isinstance(value, Tensor):
            if value.device is not self.device:
                raise DeviceError(f"{where}: tensor {value!r} belongs to another device "
                                  f"({value.device.caps.adapter_name!r}); the program was compiled for "
                                  f"{self.device.caps.adapter_name!r}")
            self.device.check_tensor(value)
            if value.dtype != spec.dtype:
                raise DtypeError(f"{where}: expects {spec.dtype}, got a {value.dtype} tensor")
            if value.shape != spec.shape:
                raise ShapeError(f"{where}: expects shape {spec.shape}, got a tensor of shape {value.shape}")
            return "copy", value
        np_dtype = dtype_info(spec.dtype).numpy
        if isinstance(value, (bool, int, float, np.integer, np.floating)) and not isinstance(value, np.ndarray):
            if spec.size != 1:
                raise ShapeError(f"{where}: expects shape {spec.shape}, got the scalar {value!r}")
            if spec.dtype in ("u32", "i32"):
                info = np.iinfo(np_dtype)
                if isinstance(value, (float, np.floating)) or not info.min <= int(value) <= info.max:
                    raise DtypeError(f"{where}: {value!r} is not a {spec.dtype} value")
            arr = np.full(spec.shape, value, np_dtype)
        else:
            if isinstance(value, (list, tuple)):
                value = as_stored(value, spec.dtype, where)
            if not isinstance(value, np.ndarray):
                raise DtypeError(f"{where}: expects a numpy array, a number or a Tensor, got {type(value).__name__}")
            if value.dtype != np_dtype:
                raise DtypeError(f"{where}: expects {spec.dtype} ({np_dtype}), got an array of {value.dtype}")
            if value.shape != spec.shape:
                raise ShapeError(f"{where}: expects shape {spec.shape}, got {value.shape}")
            arr = value
        raw = np.ascontiguousarray(arr).tobytes()
        return "bytes", raw + b"\0" * (align4(len(raw)) - len(raw))

    def run(self, **inputs) -> dict[str, Tensor]:
        """Write `inputs` into the program's input buffers and run every node in one submit."""
        self._check_device()
        want = self.graph.inputs
        missing, extra = sorted(set(want) - set(inputs)), sorted(set(inputs) - set(want))
        if missing or extra:
            raise GraphError(f"program {self.graph.name!r}: missing inputs {missing}, unknown inputs {extra}; "
                             f"it takes {sorted(want)}")
        feeds = [(name, *self._feed(name, inputs[name], spec)) for name, spec in want.items()]
        # validated: from here on, GPU work (under the device lock: programs may run on several threads)
        with self.device.lock:
            self._check_device()
            return self._run_locked(feeds)

    def _run_locked(self, feeds) -> dict[str, Tensor]:
        queue = self.device.wgpu.queue
        copies = []
        for name, kind, data in feeds:
            dst = self.tensors[name]
            if kind == "bytes":
                if data:
                    queue.write_buffer(dst.buffer, 0, data)
            elif data.buffer is not dst.buffer:
                copies.append(Copy(data, dst, dst.nbytes, label=f"input {name}"))
        self._flush_uniforms()
        encoder = self.device.wgpu.create_command_encoder(label=f"wgraph.program.{self.graph.name}")
        encode_prepared(self.device, encoder, copies + self._steps)
        self.device._submit(encoder.finish())
        self.runs += 1
        return {name: self.tensors[v] for name, v in self.graph.outputs.items()}

    __call__ = run

    def _flush_uniforms(self):
        """Write the one byte range of the arena that changed since the last upload (nothing when clean)."""
        if self._uniform_buffer is None or self._uploaded == bytes(self._arena):
            return
        now = bytes(self._arena)
        lo = next(i for i in range(len(now)) if now[i] != self._uploaded[i]) // 4 * 4
        hi = align4(max(i for i in range(len(now)) if now[i] != self._uploaded[i]) + 1)
        self.device.wgpu.queue.write_buffer(self._uniform_buffer, lo, now[lo:hi])
        self.device.stats.uniform_bytes_written += hi - lo
        self._uploaded = now

    def update(self, node_name: str, params) -> None:
        """Give node `node_name` new params that keep its kernels and buffers (a new factor, an int kv_len):
        re-encodes that node only; its uniform bytes become dirty and the next run rewrites just them."""
        g = self.graph
        node = g.node(node_name)
        if node.op in SOURCE_OPS or node.op in VIEW_OPS:
            raise GraphError(f"program {g.name!r}: node {node_name!r} ({node.op}) has no dispatches to update")
        specs = tuple(None if v is None else g.values[v].spec for v in node.inputs)
        where = f"program {g.name!r}, node {node_name!r} ({node.op})"
        if type(params) is not type(node.params):
            raise GraphError(f"{where}: update() takes {type(node.params).__name__}, got {type(params).__name__}")
        try:
            out_specs = tuple(OPS[node.op].infer(params, specs))
        except WgraphError as e:
            raise type(e)(f"{where}: {e}") from None
        if out_specs != tuple(g.values[v].spec for v in node.outputs):
            raise GraphError(f"{where}: new params change the outputs to {out_specs}; build a new graph")
        ins = tuple(None if v is None else self.tensors[v] for v in node.inputs)
        made = OPS[node.op].encode(EncodeContext(self.device), params, ins, tuple(self.tensors[v] for v in node.outputs))
        idx = [i for i, n in enumerate(self._owners) if n == node_name]
        old = [self._steps[i] for i in idx]
        if len(made) != len(old) or any(
                isinstance(d, Copy) or isinstance(s, Copy) or d.kernel is not s[0].kernel
                or [t.buffer for t in d.tensors] != [t.buffer for t in s[0].tensors] or d.indirect != s[0].indirect
                for d, s in zip(made, old)):
            raise GraphError(f"{where}: new params need other kernels or buffers; build a new graph")
        for i, d in zip(idx, made):
            _, pipeline, group, dyn = self._steps[i]
            self._steps[i] = (d, pipeline, group, dyn)
            off = self._offsets[i]
            if off is not None:
                self._arena[off:off + len(d.uniforms)] = d.uniforms
        g.nx.nodes[node_name]["node"] = attrs.evolve(node, params=params)
        self.rows = tuple(self._row(s[0], n, r.reason) if n == node_name else r
                          for s, n, r in zip(self._steps, self._owners, self.rows))

    # ---- reporting ----

    def _row(self, d, node_name: str, reason: str) -> PlanRow:
        node = self.graph.node(node_name)
        if isinstance(d, Copy):
            return PlanRow(node_name, node.op, "copy", reason, "-", 0, (d.src.label,), (d.dst.label,))
        wg = f"indirect({d.indirect[0].label or 'args'}+{d.indirect[1]})" if d.indirect else "x".join(map(str, d.workgroups))
        reads = tuple(t.label for b, t in d.bindings if not b.writes)
        writes = tuple(t.label for b, t in d.bindings if b.writes)
        return PlanRow(node_name, node.op, d.kernel.name, reason, wg, len(d.uniforms), reads, writes)

    def explain(self) -> str:
        """The plan table: one row per dispatch, then the memory plan."""
        head = ("node", "op", "variant", "workgroups", "uniform B", "reads", "writes", "reason")
        body = [(r.node, r.op, r.variant, r.workgroups, str(r.uniform_bytes), ", ".join(r.reads), ", ".join(r.writes),
                 r.reason) for r in self.rows]
        widths = [max(len(row[i]) for row in [head] + body) for i in range(len(head) - 1)]
        fmt = lambda row: "  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1]  # noqa: E731
        m = self.memory
        lines = [f"program {self.graph.name!r} on {self.device.caps.adapter_name!r}: {len(self.rows)} dispatches, "
                 f"{len(self.order)} nodes", fmt(head), fmt(tuple("-" * len(h) for h in head))]
        lines += [fmt(r) for r in body]
        lines.append(f"intermediates: {m.intermediate_values} values in {m.intermediate_buffers} buffers, peak "
                     f"{m.intermediate_bytes} B vs naive {m.naive_bytes} B; persistent {m.persistent_bytes} B; "
                     f"uniform arena {m.uniform_bytes} B")
        return "\n".join(lines)

    def to_dot(self) -> str:
        from wgraph.graph.export import program_to_dot

        return program_to_dot(self)

    def __repr__(self) -> str:
        return f"Program({self.graph.name!r}, dispatches={len(self.rows)}, device={self.device!r})"


def compile_graph(g: Graph, device) -> Program:
    with device.lock:  # compile creates pipelines, bind groups and buffers: one thread at a time
        return Program(g, device)
