"""`Program`: a graph compiled for one device. Compile encodes every node once into one command list,
places intermediate values (reused where their lives do not overlap) and every node's scratch in a memory
plan, and prepares the list (one uniform arena uploaded once, pipelines and bind groups resolved). `run`
writes the inputs, rewrites only dirty uniform bytes and submits the prepared list once."""

from __future__ import annotations

import weakref

import attrs

from wgraph.errors import DeviceError, DtypeError, RecordingError, ShapeError, WgraphError
from wgraph.graph.graph import SOURCE_OPS, Graph, GraphError
from wgraph.host_arrays import host_array
from wgraph.ops.core import OPS, EncodeContext
from wgraph.scheduler.commands import CommandList, align4
from wgraph.scheduler.dispatch import Copy
from wgraph.tensor import Tensor, TensorSpec


@attrs.frozen
class MemoryPlan:
    """Bytes a program holds. `intermediate_bytes` is the peak of the reused buffers; `naive_bytes` what one
    buffer per intermediate value would take. Scratch (partial results an op keeps only while it runs) of
    all nodes shares `scratch_buffers`, since no two nodes' scratch is live at once."""

    intermediate_buffers: int
    intermediate_bytes: int
    naive_bytes: int
    intermediate_values: int
    persistent_bytes: int
    uniform_bytes: int
    scratch_requests: int = 0
    scratch_buffers: int = 0
    scratch_bytes: int = 0
    scratch_naive_bytes: int = 0


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


def _is_view(node) -> bool:
    return node.op not in SOURCE_OPS and OPS[node.op].is_view


def _runs_kernels(node) -> bool:
    return node.op not in SOURCE_OPS and not OPS[node.op].is_view


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
        if not _runs_kernels(node):
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


class ScratchPlan:
    """Scratch of every node in shared buffers: a node's requests take distinct buffers (largest first),
    and buffer j is as large as the largest request any node puts in it."""

    def __init__(self, requests: dict[str, list[TensorSpec]]):
        self.assigned: dict[str, list[int]] = {}
        self.sizes: list[int] = []
        self.naive = 0
        for node, specs in requests.items():
            order = sorted(range(len(specs)), key=lambda i: -specs[i].nbytes)
            slots = [0] * len(specs)
            for j, i in enumerate(order):
                need = align4(max(4, specs[i].nbytes))
                self.naive += need
                if j == len(self.sizes):
                    self.sizes.append(need)
                self.sizes[j] = max(self.sizes[j], need)
                slots[i] = j
            self.assigned[node] = slots
        self.requests = sum(len(v) for v in requests.values())


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
                if _is_view(node):
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

        # ---- one command list: every node encoded once, in order; scratch first from the pool ----
        encoded = []  # (node name, dispatches, kernel plan, provisional scratch tensors)
        for n in self.order:
            node = g.node(n)
            if not _runs_kernels(node):
                continue
            provisional: list[Tensor] = []

            def pooled(spec, label, _made=provisional):
                t = device.empty(spec.shape, spec.dtype, label)
                _made.append(t)
                return t

            made, kplan = self._encode_node(n, EncodeContext(device, scratch_source=pooled))
            encoded.append((n, made, kplan, provisional))

        # ---- scratch: placed in buffers shared by all nodes, then bound in place of the pooled ones ----
        self._scratch = ScratchPlan({n: [t.spec for t in prov] for n, _, _, prov in encoded if prov})
        self._scratch_buffers = [device.empty((size // 4,), "u32", label=f"{g.name}.scratch{j}")
                                 for j, size in enumerate(self._scratch.sizes)]
        commands = CommandList(device, label=f"wgraph.program.{g.name}")
        self._owners: list[str] = []
        self._plans: dict[str, object] = {}
        for n, made, kplan, prov in encoded:
            views = {id(t): self._scratch_view(n, i, t.spec, t.label) for i, t in enumerate(prov)}
            for d in made:
                commands.append(_rebind(d, views))
                self._owners.append(n)
            self._plans[n] = kplan
        del encoded

        # ---- prepared once: the uniform arena uploaded, pipelines and bind groups held ----
        self._commands = commands.prepare(persistent=True)
        weakref.finalize(self, self._commands.release)
        self.rows = tuple(self._row(item, n) for item, n in zip(commands.items, self._owners))
        sp = self._scratch
        self.memory = MemoryPlan(len(slot_sizes), sum(slot_sizes), naive, len(slot_of), persistent_bytes,
                                 self._commands.uniform_bytes, sp.requests, len(sp.sizes), sum(sp.sizes), sp.naive)

    def _encode_node(self, node_name: str, ctx: EncodeContext, params=None):
        """Encode one node with the program's tensors: (dispatches, the kernel plan it chose or None)."""
        g = self.graph
        node = g.node(node_name)
        ins = tuple(None if v is None else self.tensors[v] for v in node.inputs)
        outs = tuple(self.tensors[v] for v in node.results)
        try:
            made = OPS[node.op].encode(ctx, node.params if params is None else params, ins, outs)
        except WgraphError as e:
            raise type(e)(f"graph {g.name!r}, node {node_name!r} ({node.op}): {e}") from None
        return made, ctx.plan

    def _scratch_view(self, node_name: str, i: int, spec: TensorSpec, label: str) -> Tensor:
        """Node `node_name`'s i-th scratch tensor: a view of the shared scratch buffer the plan gave it."""
        j = self._scratch.assigned[node_name][i]
        buf = self._scratch_buffers[j]
        if spec.nbytes > buf.nbytes:
            raise GraphError(f"program {self.graph.name!r}, node {node_name!r}: scratch {label} needs {spec.nbytes} "
                             f"bytes; the program was compiled with {buf.nbytes}: compile the graph again")
        return Tensor(self.device, buf.buffer, spec, label, base=buf)

    # ---- state ----

    def _write_state(self, name: str, data: bytes | None):
        t = self.tensors[name]
        raw = data if data is not None else bytes(t.nbytes)
        raw = raw + b"\0" * (align4(len(raw)) - len(raw))
        if raw:
            self.device.queue_write(t.buffer, 0, raw)

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
        arr = host_array(value, spec.dtype, where=where)
        if arr.shape != spec.shape and not (arr.ndim == 0 and spec.size == 1):  # a scalar fills a 1-element input
            raise ShapeError(f"{where}: expects shape {spec.shape}, got {arr.shape}")
        raw = arr.tobytes()
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
        self.device.flush()  # immediate ops called before this run read and write in order with it
        queue = self.device.wgpu.queue
        copies = []
        for name, kind, data in feeds:
            dst = self.tensors[name]
            if kind == "bytes":
                if data:
                    queue.write_buffer(dst.buffer, 0, data)
            elif data.buffer is not dst.buffer:
                copies.append(Copy(data, dst, dst.nbytes, label=f"input {name}"))
        self._commands.submit(head=copies)
        self.runs += 1
        return {name: self.tensors[v] for name, v in self.graph.outputs.items()}

    __call__ = run

    def update(self, node_name: str, params) -> None:
        """Give node `node_name` new params that keep its kernels (a new factor, an int kv_len within the
        compiled capacity): re-encodes that node only; its uniform bytes become dirty and the next run
        rewrites just them. Raises GraphError naming the params that need a new compile otherwise."""
        g = self.graph
        node = g.node(node_name)
        where = f"program {g.name!r}, node {node_name!r} ({node.op})"
        if not _runs_kernels(node):
            raise GraphError(f"{where} has no dispatches to update")
        if type(params) is not type(node.params):
            raise GraphError(f"{where}: update() takes {type(node.params).__name__}, got {type(params).__name__}")
        changed = [f.name for f in attrs.fields(type(params)) if getattr(params, f.name) != getattr(node.params, f.name)]
        specs = tuple(None if v is None else g.values[v].spec for v in node.inputs)
        try:
            out_specs = tuple(OPS[node.op].infer(params, specs))
        except WgraphError as e:
            raise type(e)(f"{where}: {e}") from None
        if out_specs != tuple(g.values[v].spec for v in node.results):
            raise GraphError(f"{where}: new params ({', '.join(changed)}) change the outputs to {out_specs}; "
                             f"build a new graph")
        idx = [i for i, n in enumerate(self._owners) if n == node_name]
        scratch = iter(range(len(self._scratch.assigned.get(node_name, []))))

        def from_plan(spec, label):
            i = next(scratch, None)
            if i is None:
                raise GraphError(f"{where}: new params ({', '.join(changed)}) need scratch the compiled node does "
                                 f"not have; compile the graph again")
            return self._scratch_view(node_name, i, spec, label)

        made, kplan = self._encode_node(node_name, EncodeContext(self.device, scratch_source=from_plan), params)
        old = [self._commands.steps[i].dispatch for i in idx]
        new_kernels = [getattr(d, "kernel", None) for d in made]
        if len(made) != len(old) or any(a is not b.kernel for a, b in zip(new_kernels, old)):
            raise GraphError(f"{where}: new params ({', '.join(changed)}) need kernels "
                             f"{[k.name if k else 'copy' for k in new_kernels]} instead of "
                             f"{[d.kernel.name for d in old]}; compile the graph again")
        for i, d, o in zip(idx, made, old):
            if (d.indirect is None) != (o.indirect is None) or (d.indirect and d.indirect[0].buffer is not o.indirect[0].buffer):
                raise GraphError(f"{where}: new params ({', '.join(changed)}) change {d.label}'s indirect dispatch; "
                                 f"compile the graph again")
        with self.device.lock:
            for i, d in zip(idx, made):
                self._commands.replace_step(i, d)
                if self._commands.offsets[i] is not None:
                    self._commands.set_uniforms(i, d.uniforms)
        g.nx.nodes[node_name]["node"] = attrs.evolve(node, params=params)
        self._plans[node_name] = kplan
        rows = list(self.rows)
        for i, d in zip(idx, made):
            rows[i] = self._row(d, node_name)
        self.rows = tuple(rows)

    # ---- reporting ----

    def _row(self, d, node_name: str) -> PlanRow:
        node = self.graph.node(node_name)
        reason = getattr(self._plans.get(node_name), "reason", "")
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
        lines.append(f"scratch: {m.scratch_requests} requests in {m.scratch_buffers} shared buffers, "
                     f"{m.scratch_bytes} B vs naive {m.scratch_naive_bytes} B")
        return "\n".join(lines)

    def to_dot(self) -> str:
        from wgraph.graph.export import program_to_dot

        return program_to_dot(self)

    def __repr__(self) -> str:
        return f"Program({self.graph.name!r}, dispatches={len(self.rows)}, device={self.device!r})"


def _rebind(d, views: dict):
    """`d` with every tensor in `views` (by id) replaced: pooled scratch becomes the program's scratch."""
    if not views or isinstance(d, Copy):
        return d
    tensors = tuple([views.get(id(t), t) for t in d.tensors])
    indirect = d.indirect and (views.get(id(d.indirect[0]), d.indirect[0]), d.indirect[1])
    return d.replace(tensors=tensors, indirect=indirect)


def compile_graph(g: Graph, device) -> Program:
    with device.lock:  # compile creates pipelines, bind groups and buffers: one thread at a time
        return Program(g, device)
