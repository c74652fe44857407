"""`Program`: a graph compiled for one device. Compile places intermediate values in a memory plan (reused
where their lives do not overlap), captures every node as a recording captures an op call (ops/core.py
`capture`: its template), fills the templates with the program's tensors and its shared scratch into one
command list, and prepares the list (one uniform arena uploaded once, pipelines and bind groups resolved).
`run` writes the inputs, rewrites only dirty uniform bytes and submits the prepared list once; `run_many`
replays it back to back in an in-flight window; `profile` times one replay per node."""

from __future__ import annotations

import time
import weakref
from typing import TYPE_CHECKING, Any

import attrs

from wgraph import args
from wgraph.args import show
from wgraph.errors import (AliasingError, DeviceError, DtypeError, LimitError, RecordingError, ShapeError,
                           UnsupportedError, WgraphError)
from wgraph.graph import explain, export
from wgraph.graph.nodes import SOURCE_OPS, GraphError, Value
from wgraph.graph.profile import ProgramProfile
from wgraph.host_arrays import host_array
from wgraph.ops import core
from wgraph.scheduler.commands import CommandList, align4
from wgraph.scheduler.dispatch import Copy
from wgraph.scheduler.profiling import Timestamps
from wgraph.scheduler.window import InFlightWindow
from wgraph.tensor import Tensor, TensorSpec

MAX_PER_SUBMIT = 1024  # replays one run_many submit may encode (a command buffer of 1024 decode steps is plenty)

if TYPE_CHECKING:
    from wgraph.api_types import HostData
    from wgraph.device import Device
    from wgraph.graph.graph import Graph


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
    return node.op not in SOURCE_OPS and core.OPS[node.op].is_view


def _kernel_labels(kernels) -> list[str]:
    """Kernel names with their compiled-in constants (a pipeline is a variant and its constants): two lists of the
    same variants still show what differs."""
    return [k.name + ("(" + ", ".join(f"{n}={v}" for n, v in k.constants.items()) + ")" if k.constants else "")
            for k in kernels]


def _runs_kernels(node) -> bool:
    return node.op not in SOURCE_OPS and not core.OPS[node.op].is_view


def _plan_buffers(g, order: list[str], persistent: set[str]):
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


def _check_shared(g, device, shared: dict) -> dict:
    """{state name: Tensor} of states whose buffers another owner holds: each a state of `g`, a live Tensor of
    `device` of the state's shape and dtype."""
    if not isinstance(shared, dict):
        raise args.fail("Graph.compile", "shared_states", shared, "None or a dict {state name: Tensor}")
    for name, t in shared.items():
        where = f"graph {g.name!r}: shared state {name!r}"
        if name not in g.states:
            raise GraphError(f"{where} is not a state of the graph; states: {sorted(g.states)}")
        if not isinstance(t, Tensor):
            raise args.fail("Graph.compile", f"shared_states[{name!r}]", t, "a Tensor of the device the graph "
                                                                               "compiles for")
        if t.device is not device:
            raise DeviceError(f"{where} must be a Tensor of the device the graph compiles for, got {t!r}")
        device.check_tensor(t)
        want = g.states[name].spec
        if t.spec != want:
            error = DtypeError if t.shape == want.shape else ShapeError
            raise error(f"{where} is {want.dtype} {want.shape}; the tensor given is {t.dtype} {t.shape}")
    # The graph plans each state as a buffer of its own: two that nodes write (kv_append's k and v caches) given
    # one buffer would have one write overwrite the other. States only read may share one (tied weights).
    written: dict[int, list[str]] = {}
    for name, t in shared.items():
        if name in g._last_writer:
            written.setdefault(id(t.buffer), []).append(name)
    for names in written.values():
        if len(names) > 1:
            raise AliasingError(f"graph {g.name!r}: shared states {' and '.join(map(repr, names))} are one buffer "
                                f"({shared[names[0]]!r}; views of one tensor count), and nodes write both: the graph "
                                f"plans them as two buffers, so one write would overwrite the other: give each its "
                                f"own tensor")
    return dict(shared)


class Program:
    """A compiled graph. `run(**inputs)` -> {output name: Tensor}; the tensors are the program's own buffers,
    overwritten by the next run (call .numpy() before running again, or copy). Made by Graph.compile.

    graph: the Graph it was compiled from. device: the Device it runs on. shared_states: {state name: Tensor}
    buffers it uses instead of its own (Graph.compile's)."""

    def __init__(self, graph: Graph, device: Device, shared_states: dict[str, Tensor] | None = None) -> None:
        device.check_alive()
        # read before the shared states are checked: a tensor poisoned from here on moves the count past it, and
        # the first run checks again (_check_unusable)
        self._poisons_seen = device._poisons
        self.shared = _check_shared(graph, device, {} if shared_states is None else shared_states)
        self.graph = graph
        self.device = device
        self.epoch = device.epoch
        self.order = graph.topological_order()
        self.runs = 0
        g = graph
        # what the program runs with, as compiled: the graph may grow afterwards (a new input, output or state),
        # and run / state / reset_state must not ask for, or look up, buffers this program never made
        self.inputs, self.outputs, self.states = dict(g.inputs), dict(g.outputs), dict(g.states)
        persistent = set(g.inputs) | set(g.states) | {g.base[v] for v in g.outputs.values()}
        limit = device.caps.max_storage_binding_size
        for v, spec in g.values.items():   # before any buffer: a slot was refused as dev.empty's u32 shape, unnamed
            if g.base[v] == v and v not in self.shared and spec.nbytes > limit:
                raise LimitError(f"graph {g.name!r}: value {v!r} ({spec.dtype} {spec.shape}) is {spec.nbytes} bytes; "
                                 f"the device binds at most {limit} bytes per storage buffer")
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
                    self.tensors[v] = Tensor(device, base.buffer, spec, v, base=base._owner)
                elif v in slot_of:
                    slot = self._slots[slot_of[v]]
                    self.tensors[v] = Tensor(device, slot.buffer, spec, v, base=slot)
                elif v in self.shared:
                    self.tensors[v] = self.shared[v]
                else:
                    self.tensors[v] = device.empty(spec.shape, spec.dtype, label=v)
                    persistent_bytes += spec.nbytes
        for name, st in g.states.items():
            if name not in self.shared:
                self._write_state(name, st.init)
        self.memory_plan_slots = dict(slot_of)

        # ---- every node captured, as a recording captures an op call; then filled into one command list
        # whose scratch space was sized for every node's requests first ----
        self.params = {n: g.node(n).params for n in self.order if _runs_kernels(g.node(n))}
        captured = [(n, self._capture(n, params)) for n, params in self.params.items()]
        commands = CommandList(device.scheduler, label=f"wgraph.program.{g.name}")
        self._scratch = commands.scratch
        for _, tpl in captured:
            self._scratch.reserve(tpl.scratch)
        self._owners: list[str] = []
        self._plans: dict[str, object] = {}
        for n, tpl in captured:
            commands.call(tpl, *self._node_tensors(n))
            self._owners += [n] * len(tpl.dispatches)
            self._plans[n] = tpl.plan
        del captured

        # ---- prepared once: the uniform arena uploaded, pipelines and bind groups held ----
        self._commands = commands.prepare(persistent=True)
        weakref.finalize(self, self._commands.release)
        # an input a node writes must be fed again before each replay: run_many submits those one by one
        self._writes_an_input = any(g.base[v] in g._last_writer for v in g.inputs)
        self.rows = tuple(self._row(item, n) for item, n in zip(commands.items, self._owners))
        sp = self._scratch
        self.memory = MemoryPlan(len(slot_sizes), sum(slot_sizes), naive, len(slot_of), persistent_bytes,
                                 self._commands.uniform_bytes, sp.requests, sp.buffers, sp.nbytes, sp.naive_bytes)

    def _node_tensors(self, node_name: str) -> tuple[tuple, tuple]:
        """The program's tensors a node reads (None for an absent optional input) and writes."""
        node = self.graph.node(node_name)
        return (tuple(None if v is None else self.tensors[v] for v in node.inputs),
                tuple(self.tensors[v] for v in node.results))

    def _capture(self, node_name: str, params):
        """The node's template (ops/core.py `capture`) on the program's tensors; errors name the node."""
        node = self.graph.node(node_name)
        where = f"graph {self.graph.name!r}, node {node_name!r} ({node.op})"
        try:
            return core.capture(self.device, core.OPS[node.op], params, *self._node_tensors(node_name))
        except WgraphError as e:
            raise type(e)(f"{where}: {e}") from None
        except (TypeError, ValueError, AttributeError) as e:  # a field of the wrong kind the op's encode met
            raise GraphError(f"{where}: {type(e).__name__}: {e}") from None

    # ---- state ----

    def _state_bytes(self, name: str, data: bytes | None) -> bytes:
        raw = data if data is not None else bytes(self.tensors[name].nbytes)
        return raw + b"\0" * (align4(len(raw)) - len(raw))

    def _write_state(self, name: str, data: bytes | None):
        """A new state's first contents (compile): a queue write now, even inside a recording, since nothing
        recorded can bind a buffer made here."""
        raw = self._state_bytes(name, data)
        if raw:
            self.device.scheduler.write_buffer(self.tensors[name].buffer, 0, raw)

    def state(self, name: str) -> Tensor:
        """The program's persistent buffer `name` (a state, a const or an input).

        name: the state's (or const's, or input's) name in the graph.
        """
        # np.str_ by its characters: the names are plain strs (args.text)
        key = args.plain_str(name)
        if key is None or (key not in self.states and key not in self.inputs):
            late = key is not None and (key in self.graph.states or key in self.graph.inputs)
            hint = " (added to the graph after it was compiled: compile the graph again to take it)" if late else ""
            # it takes an input's name too: listing only the states left those out of what it takes
            raise GraphError(f"program {self.graph.name!r}: state(name={show(name)}): no such state or input; "
                             f"states: {sorted(self.states)}, inputs: {sorted(self.inputs)}{hint}")
        return self.tensors[key]

    def reset_state(self, name: str | None = None) -> None:
        """Refill one state (or all) with its init data or zeros; shared states are left as they are. The write
        keeps its place among the op calls around it, as dev.write's does (inside dev.record() too).

        name: the state to refill; None: every state.
        """
        if name is not None:
            # np.str_ by its characters: the names are plain strs (args.text)
            plain = args.plain_str(name)
            if plain is None or plain not in self.states:
                # as state() says it: a state added after compile, or an input (which every run writes afresh)
                if plain in self.inputs:
                    hint = f" ({plain!r} is an input: every run writes it, there is nothing to refill)"
                elif plain is not None and plain in self.graph.states:
                    hint = " (added to the graph after it was compiled: compile the graph again to take it)"
                else:
                    hint = ""
                raise GraphError(f"program {self.graph.name!r}: reset_state(name={show(name)}): no such state; "
                                 f"states: {sorted(self.states)}{hint}")
            name = plain
        dev = self.device
        if dev.lost or dev.epoch != self.epoch:   # else wgpu's raw GPUValidationError for the old device's buffers
            raise DeviceError(f"program {self.graph.name!r}: reset_state(): the program was compiled for epoch "
                              f"{self.epoch}; the device is now {'lost' if dev.lost else f'epoch {dev.epoch}'}: "
                              f"compile the graph again")
        for n, st in self.states.items():
            if (name is None or n == name) and n not in self.shared:
                raw = self._state_bytes(n, st.init)
                if raw:
                    # as dev.write: in its place among the op calls around it (an item of the open recording, or
                    # of the pending list), not a queue write that lands before ops recorded earlier
                    dev.scheduler.write(self.tensors[n], raw)

    # ---- running ----

    def _check_epoch(self):
        dev = self.device
        if dev.lost or dev.epoch != self.epoch:
            raise DeviceError(f"program {self.graph.name!r} was compiled for {dev.caps.adapter_name!r} epoch "
                              f"{self.epoch}; the device is now {'lost' if dev.lost else f'epoch {dev.epoch}'}: "
                              f"compile the graph again")

    def _check_device(self):
        self._check_epoch()
        if self.device.scheduler.recording is not None:
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
        if isinstance(value, Value):
            # the Value's own error (no data: "make it an output, compile, run") named no input and told a caller who
            # is running the program to compile it; a state's data is the program's buffer of it
            mine = value.graph is self.graph and value.name in self.states
            raise GraphError(f"{where}: got {value!r}, a value of graph {value.graph.name!r}, which holds no data; "
                             f"a run takes host data or a Tensor"
                             + (f" (this program's buffer of state {value.name!r} is prog.state({value.name!r}))"
                                if mine else ""))
        arr = host_array(value, spec.dtype, where=where)
        if arr.shape != spec.shape and not (arr.ndim == 0 and spec.size == 1):  # a scalar fills a 1-element input
            raise ShapeError(f"{where}: expects shape {spec.shape}, got {arr.shape}")
        raw = arr.tobytes()
        return "bytes", raw + b"\0" * (align4(len(raw)) - len(raw))

    def _feeds(self, inputs: dict) -> list:
        """Every input validated: (name, kind, data) each (see _feed). No GPU work."""
        self._check_device()
        want = self.inputs
        missing, extra = sorted(set(want) - set(inputs)), sorted(set(inputs) - set(want))
        if missing or extra:
            late = [n for n in extra if n in self.graph.inputs]  # g.input(...) after compile: not this program's
            hint = (f" ({late} added to the graph after it was compiled: compile the graph again to take them)"
                    if late else "")
            raise GraphError(f"program {self.graph.name!r}: missing inputs {missing}, unknown inputs {extra}; "
                             f"it takes {sorted(want)}{hint}")
        feeds = [(name, *self._feed(name, inputs[name], spec)) for name, spec in want.items()]
        owner = {id(self.tensors[name].buffer): name for name in want}
        for name, kind, data in feeds:
            other = owner.get(id(data.buffer)) if kind == "copy" else None
            if other is not None and other != name:
                # every input is written by this run, in an order of its own: the copy would read `other`'s new value
                raise AliasingError(f"program {self.graph.name!r}, input {name!r}: the tensor given is input "
                                    f"{other!r}'s own buffer (prog.state({other!r}), or a view of it), which this run "
                                    f"writes with {other!r}'s new value: pass a copy of it")
        return feeds

    # self positional-only: an input named 'self' is one of **inputs, not a second value for the parameter
    # (prog.run(self=...) was Python's TypeError 'got multiple values for argument')
    def run(self, /, **inputs: HostData | Tensor) -> dict[str, Tensor]:
        """Write `inputs` into the program's input buffers and run every node in one submit.

        inputs: one keyword per graph input: host data of its shape and dtype (Python numbers and lists take the
            dtype; a scalar fills a one-element input) or a Tensor of this device.
        """
        feeds = self._feeds(inputs)
        # validated: from here on, GPU work (under the device lock: programs may run on several threads)
        with self.device.lock:
            self._check_device()
            return self._run_locked(feeds)

    def _run_locked(self, feeds, timestamps=None, repeats: int = 1) -> dict[str, Tensor]:
        # writes and the submit go through the scheduler, which submits pending immediate ops first
        scheduler = self.device.scheduler
        if self.device._poisons != self._poisons_seen:   # a tensor of the device was poisoned since the last look
            self._check_unusable(feeds)
        copies = []
        for name, kind, data in feeds:
            dst = self.tensors[name]
            if kind == "bytes":
                if data:
                    scheduler.write_buffer(dst.buffer, 0, data)
            elif data.buffer is not dst.buffer:
                copies.append(Copy(data, dst, dst.nbytes, label=f"input {name}"))
        self._commands.submit(head=copies, timestamps=timestamps, repeats=repeats)
        self.runs += repeats
        return {name: self.tensors[v] for name, v in self.outputs.items()}

    __call__ = run

    def _check_unusable(self, feeds) -> None:
        """RecordingError when a tensor this replay binds became unusable after it was compiled (or after the
        run_many that feeds it began): a failed recording or flush wrote it, or it was made inside a recording
        since discarded. The replay read its never-written bytes silently. Lock held."""
        seen = self.device._poisons   # no poison lands during the look: Tensor.poison takes the lock held here
        bound = [(self._role(name), name, t) for name, t in self.tensors.items()]
        bound += [("input", name, data) for name, kind, data in feeds if kind == "copy"]
        for role, name, t in bound:
            reason = t.poisoned
            if reason is not None:
                fix = ("compile the graph again with a tensor that holds what it should read" if name in self.shared
                       else "pass a tensor that holds what it should read" if role == "input"
                       else "its bytes are not what the program last wrote: compile the graph again")
                raise RecordingError(f"program {self.graph.name!r}: {role} {name!r} ({t!r}) is unusable: {reason}; "
                                     f"{fix}")
        self._poisons_seen = seen

    def _role(self, name: str) -> str:
        if name in self.shared:
            return "shared state"
        if name in self.states:
            return "state"
        if name in self.inputs:
            return "input buffer"
        return "output" if name in self.outputs.values() else "value"

    def run_many(self, /, n: int, *, in_flight: int = 8, per_submit: int = 1, **inputs: HostData | Tensor) -> float:
        """Replay `n` times with the same `inputs` (a decode loop whose state lives on the GPU), submitting back
        to back while at most `in_flight` submits are unfinished on the GPU (scheduler/window.py: a fence
        wait, not a readback). Returns the host seconds spent in the replays themselves (encode and submit).

        n: how many replays.
        in_flight: the most submits unfinished on the GPU at once.
        per_submit: replays encoded into one command buffer and submitted together: a submit's fixed cost (the
            host's finish, submit and fence; the GPU's gap between submits) is paid once for them. A program
            that writes one of its inputs, or starts with queue writes, still submits each replay alone (a
            second replay in the same submit would not see the input written again).
        inputs: as `run`'s, the same for every replay.
        """
        clash = [name for name in ("n", "in_flight", "per_submit") if name in self.inputs]
        if clash:
            # run_many's own keyword takes the value given for an input of its name: in_flight=3 set the window and
            # the input was then 'missing' though given (n=... beside a positional n is Python's TypeError)
            raise GraphError(f"program {self.graph.name!r}: run_many(): input {clash[0]!r} has the name of run_many's "
                             f"own {clash[0]}= argument, which would take its value: give the input another name "
                             f"(run and profile take it as it is)")
        n = args.integer("Program.run_many", "n", n, 0, args.I64_MAX)
        in_flight = args.integer("Program.run_many", "in_flight", in_flight, 1, args.U32_MAX)
        per_submit = args.integer("Program.run_many", "per_submit", per_submit, 1, MAX_PER_SUBMIT)
        feeds = self._feeds(inputs)
        if self._writes_an_input or self._commands.head_writes:
            per_submit = 1
        window = InFlightWindow(self.device.scheduler, in_flight)
        host = 0.0

        def replay(k: int):
            nonlocal host
            t = time.perf_counter()
            with self.device.lock:
                self._check_device()
                self._run_locked(feeds, repeats=k)
            host += time.perf_counter() - t

        for first in range(0, n, per_submit):
            k = min(per_submit, n - first)
            window.submit(lambda: replay(k))
        return host

    def profile(self, /, **inputs: HostData | Tensor) -> ProgramProfile:
        """Run one replay with GPU timestamps around every dispatch and wait for it: GPU time per node, by op
        and by layer (graph scopes), as a ProgramProfile (`.table()` prints it). UnsupportedError where the
        device has no timestamp queries.

        inputs: as `run`'s.
        """
        feeds = self._feeds(inputs)   # the inputs are checked first, whatever the device
        caps = self.device.caps
        if not caps.has_timestamps:
            raise UnsupportedError(f"program {self.graph.name!r}: profile() needs timestamp queries; "
                                   f"{caps.adapter_name!r} has neither timestamp-query nor "
                                   f"timestamp-query-inside-passes")
        if not self._owners:
            raise GraphError(f"program {self.graph.name!r} has no dispatches to profile")
        with self.device.lock:
            self._check_device()
            stamps = Timestamps(self.device.wgpu, len(self._owners), caps.has_timestamps_inside_passes,
                                self.device.stats)
            self._run_locked(feeds, stamps)
            # read under the lock, as every call into wgpu is: a dev.destroy() on another thread between the submit
            # and this map made it wgpu's raw GPUValidationError ("Parent device is lost")
            ticks = stamps.ticks_ns()
            scheduler = self.device.scheduler
            scheduler.completed(scheduler.last_index)   # the map waited for every submission up to the profiled one
        ops = {n: self.graph.node(n).op for n in self._owners}
        return ProgramProfile.from_ticks(self.graph.name, caps.adapter_name, self._owners, ops, ticks,
                                         stamps.inside_passes)

    def update(self, node_name: str, params: Any) -> None:
        """Give node `node_name` new params that keep its kernels (a new factor, an int kv_len within the
        compiled capacity): captures that node again and rebinds its dispatches; its uniform bytes become dirty
        and the next run rewrites just them. The program changes, not the graph it was compiled from
        (`prog.params` holds the params each node runs with). Raises GraphError naming the params that need a
        new compile otherwise.

        node_name: the node's name (prog.order lists them).
        params: the node's new params, of its class (prog.params[node_name] is the current one; attrs.evolve it).
        """
        g = self.graph
        # np.str_ by its characters: the names are plain strs (args.text)
        plain = args.plain_str(node_name)
        if plain is None or plain not in self.order:   # a node added after compile is not run
            raise GraphError(f"program {g.name!r}: update(node_name={show(node_name)}): no such node; nodes: "
                             f"{self.order}")
        node_name = plain
        node = g.node(node_name)
        where = f"program {g.name!r}, node {node_name!r} ({node.op})"
        if not _runs_kernels(node):
            raise GraphError(f"{where} has no dispatches to update")
        now = self.params[node_name]
        if type(params) is not type(now):
            raise GraphError(f"{where}: update(): params must be the node's class {type(now).__name__}, "
                             f"got {type(params).__name__}")
        params = args.plain_params(params)   # the caller's numpy scalars as plain values, as an op call's are
        changed = ", ".join(f.name for f in attrs.fields(type(params)) if getattr(params, f.name) != getattr(now, f.name))
        specs = tuple(None if v is None else g.values[v].spec for v in node.inputs)
        try:
            out_specs = tuple(core.OPS[node.op].infer(params, specs))
        except WgraphError as e:
            raise type(e)(f"{where}: {e}") from None
        except (TypeError, ValueError, AttributeError) as e:  # a field of the wrong kind the op's infer met first
            raise GraphError(f"{where}: {type(e).__name__}: {e}") from None
        if out_specs != tuple(g.values[v].spec for v in node.results):
            raise GraphError(f"{where}: new params ({changed}) change the outputs to {out_specs}; build a new graph")
        tpl = self._capture(node_name, params)
        idx = [i for i, n in enumerate(self._owners) if n == node_name]
        old = [self._commands.steps[i].dispatch.kernel for i in idx]
        new = [d.kernel for d in tpl.dispatches]
        if new != old:
            raise GraphError(f"{where}: new params ({changed}) need kernels {_kernel_labels(new)} instead of "
                             f"{_kernel_labels(old)}; compile the graph again")
        try:
            scratch = self._scratch.place(tpl.scratch, grow=False) if tpl.scratch else ()
        except LimitError as e:
            raise GraphError(f"{where}: new params ({changed}) need more scratch than the program was compiled "
                             f"with ({e}); compile the graph again") from None
        made = tpl.instantiate(*self._node_tensors(node_name), scratch)
        with self.device.lock:
            # again under the lock: a dev.destroy() or recreate() on another thread since the capture made the
            # pipeline and bind group lookups below wgpu's raw GPUValidationError (the old device's buffers)
            self._check_epoch()
            for i, d in zip(idx, made):
                self._commands.replace_step(i, d)
                if self._commands.offsets[i] is not None:
                    self._commands.set_uniforms(i, d.uniforms)
            # under the lock with the steps: two threads updating nodes at once each read rows and wrote them back,
            # and one's row (or params beside another's steps) could be lost
            self.params[node_name] = params
            self._plans[node_name] = tpl.plan
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
        # the graph's value names, by the node's own tensors: a shared state is another owner's tensor, whose label
        # (often "") is no value of this graph; scratch, fallbacks and the error flag keep their labels
        names = {id(self.tensors[v]): v for v in (*node.inputs, *node.results) if v is not None}
        if d.indirect:
            args_name = names.get(id(d.indirect[0]), d.indirect[0].label or "args")
            wg = f"indirect({args_name}+{d.indirect[1]})"
        else:
            wg = "x".join(map(str, d.workgroups))
        reads = tuple(names.get(id(t), t.label) for b, t in d.bindings if not b.writes)
        writes = tuple(names.get(id(t), t.label) for b, t in d.bindings if b.writes)
        return PlanRow(node_name, node.op, d.kernel.name, reason, wg, len(d.uniforms), reads, writes)

    def explain(self, full: bool = False) -> str:
        """The plan table: a row per dispatch (its kernel, workgroups, what it reads and writes, why the planner
        chose it), then the memory plan; at most 100 columns, or with full=True every binding and count."""
        if args.flag("Program.explain", "full", full):
            return explain.full_text(self)
        return explain.short_text(self)

    def to_dot(self) -> str:
        """The program in Graphviz DOT: the graph's nodes with the kernels they run."""
        return export.program_to_dot(self)

    def __repr__(self) -> str:
        return f"Program({self.graph.name!r}, dispatches={len(self.rows)}, device={self.device!r})"
