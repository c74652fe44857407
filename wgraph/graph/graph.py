"""`Graph`: a networkx.DiGraph of frozen `Node`s built by calling the ordinary op functions on `Value` symbols.
Every node is validated by its op's `infer` when it is added; errors name the graph and the node."""

from __future__ import annotations

import contextlib
from typing import Any

import attrs

from wgraph import args
from wgraph.api_types import DTypeLike, HostData, Shape
from wgraph.args import show
from wgraph.device import Device, default_device
from wgraph.dtypes import dtype_of_numpy
from wgraph.errors import AliasingError, ShapeError, WgraphError
from wgraph.graph import export
from wgraph.graph.nodes import SOURCE_OPS, GraphError, Node, StateSpec, Value
from wgraph.graph.program import Program
from wgraph.host_arrays import host_array
from wgraph.ops.core import OPS
from wgraph.tensor import Tensor, TensorSpec

def _node_error(exc: WgraphError, where: str) -> WgraphError:
    """The same error class, its message prefixed with the graph and node."""
    return type(exc)(f"{where}: {exc}")


def _no_value(data, where: str) -> None:
    """GraphError naming `where` for a graph Value given as host data: its own error (no data: "make it an output,
    compile, run") named neither the graph's state nor the const it was given for."""
    if isinstance(data, Value):
        raise GraphError(f"{where}: got {data!r}, a value of graph {data.graph.name!r}, which holds no data until a "
                         f"program runs; give host data (a numpy array or numbers)")


class Graph:
    """Build with `g.input`, `g.state`, `g.const`, op calls on the values they return, and `g.output`; then
    `g.compile(dev)` gives a Program that replays the whole graph in one submit.

    name: the graph's name (in errors, explain() and exports)."""

    def __init__(self, name: str = "graph") -> None:
        import networkx as nx  # here, not at the top: `import wgraph` for immediate ops stays ~0.3 s faster

        self.name = args.text("Graph", "name", name)
        self.nx = nx.DiGraph()
        self.values: dict[str, Value] = {}
        self.producer: dict[str, str] = {}        # value name -> node name
        self.base: dict[str, str] = {}            # value name -> the value whose buffer it uses (views)
        self.inputs: dict[str, TensorSpec] = {}
        self.states: dict[str, StateSpec] = {}
        self.outputs: dict[str, str] = {}         # output name -> value name
        self._order: dict[str, int] = {}          # node name -> insertion index (the topological tie-break)
        self._counter = 0
        self._scope: list[str] = []
        self._last_writer: dict[str, str] = {}    # base value -> last node that writes it in place
        self._readers: dict[str, list[str]] = {}  # base value -> nodes reading it since that write
        self._result_heads: set[str] = set()      # "n" of every value named "n:<digits>" (an op's default output name)

    # ---- building ----

    def input(self, name: str, shape: Shape, dtype: DTypeLike = "f32") -> Value:
        """A value given to every `run` (a numpy array, a Python number for a one-element input, or a Tensor).

        name: the keyword `run` takes it by.
        shape: a tuple of integers.
        dtype: wgraph's name ("f32", "f16", "bf16", "i32", "u32") or numpy's or torch's spelling of one.
        """
        name = args.text("Graph.input", "name", name)   # a str subclass (np.str_) as the plain str
        spec = self._source_spec("input", name, shape, dtype)
        self.add(Node(name, "input", None, (), (name,)), specs=(spec,))
        self.inputs[name] = spec
        return self.values[name]

    def state(self, name: str, shape: Shape, dtype: DTypeLike = "f32", init: HostData | None = None) -> Value:
        """A persistent buffer the program owns (a KV cache, a position): zeros or `init` at compile, then kept.

        name: the state's name (prog.state(name) is its tensor).
        shape: a tuple of integers.
        dtype: wgraph's name ("f32", "f16", "bf16", "i32", "u32") or numpy's or torch's spelling of one.
        init: host data of that shape and dtype to fill it with at compile (Python numbers and lists take the dtype;
            a number fills a one-element state); None: zeros.
        """
        name = args.text("Graph.state", "name", name)   # a str subclass (np.str_) as the plain str
        spec = self._source_spec("state", name, shape, dtype)
        data = None
        if init is not None:
            _no_value(init, f"graph {self.name!r}: state {name!r} init")
            arr = host_array(init, spec.dtype, where=f"graph {self.name!r}: state {name!r} init")
            # exactly: a (3, 2) init of a (2, 3) state is not its transpose; a number fills a one-element state,
            # as Program.run's inputs and dev.write take one (init=5 for a (1,) state was a ShapeError)
            if arr.shape != spec.shape and not (arr.ndim == 0 and spec.size == 1):
                raise ShapeError(f"graph {self.name!r}: state {name!r} is {spec.shape}; init has shape {arr.shape} "
                                 f"(it must have the state's shape)")
            data = arr.tobytes()
        self.add(Node(name, "state", None, (), (name,)), specs=(spec,))
        self.states[name] = StateSpec(name, spec, data)
        return self.values[name]

    def const(self, name: str, array: HostData, dtype: DTypeLike | None = None) -> Value:
        """A weight: a state initialised from `array` (uploaded once, at compile).

        name: the weight's name (a state of the program).
        array: host data (its shape and, without dtype, its dtype are the value's).
        dtype: None (the array's own) or the dtype to convert to (wgraph's name or numpy's or torch's spelling).
        """
        name = args.text("Graph.const", "name", name)
        dtype = args.optional_dtype_name("Graph.const", "dtype", dtype)
        _no_value(array, f"graph {self.name!r}: const {name!r}")
        arr = host_array(array, dtype, convert=dtype is not None, where=f"graph {self.name!r}: const {name!r}")
        return self.state(name, arr.shape, dtype_of_numpy(arr.dtype), init=arr)

    def output(self, name: str, value: Value) -> None:
        """Name `value` as a result of `run`.

        name: the key of `run`'s result dict.
        value: a value of this graph.
        """
        name = args.text("Graph.output", "name", name)
        if not isinstance(value, Value) or value.graph is not self:
            raise GraphError(f"graph {self.name!r}: output {name!r} must be a value of this graph, got {value!r}")
        if name in self.outputs:
            raise GraphError(f"graph {self.name!r}: output {name!r} is defined twice")
        self.outputs[name] = value.name

    def scope(self, prefix: str) -> contextlib.AbstractContextManager[None]:
        """Name the nodes added inside `with g.scope("layer0"):` as layer0/<op>_<n>.

        prefix: the scope's name.
        """
        return self._scoped(args.text("Graph.scope", "prefix", prefix))  # checked now, not at `with`

    @contextlib.contextmanager
    def _scoped(self, prefix: str):
        self._scope.append(prefix)
        try:
            yield
        finally:
            self._scope.pop()

    def add_op(self, op: Any, params: Any, inputs: tuple, out: Any = None) -> Any:
        """What `wgraph.ops.core.apply` calls for symbolic inputs: a node; returns its output value(s).

        op: the OpDef. params: its checked params. inputs: the op's inputs (Values or None).
        out: `out=` state values the op writes in place, or None.
        """
        where = f"graph {self.name!r}, op {op.name}"
        writes = self._out_values(out, where) if out is not None else ()
        names = []
        for i, x in enumerate(inputs):
            if x is None:
                names.append(None)
            elif isinstance(x, Value):
                if x.graph is not self:
                    raise GraphError(f"{where}: input {i} ({x.name!r}) belongs to graph {x.graph.name!r}")
                names.append(x.name)
            else:
                raise GraphError(f"{where}: input {i} is a {type(x).__name__}; in a graph every tensor input must be "
                                 f"a value (use g.input, g.state or g.const)")
        self._counter += 1
        node_name = "/".join(self._scope + [f"{op.name}_{self._counter}"])
        # a graph read from a file holds names its node count does not predict, and an input or state may be named
        # as an op's output ("scale_1:0"): a name taken either way would make add() refuse this op
        while node_name in self.nx or node_name in self._result_heads:
            self._counter += 1
            node_name = "/".join(self._scope + [f"{op.name}_{self._counter}"])
        node = self.add(Node(node_name, op.name, params, tuple(names), (), writes))
        outs = tuple(self.values[v] for v in node.results)
        return outs[0] if len(outs) == 1 else outs

    def _source_spec(self, kind: str, name, shape, dtype) -> TensorSpec:
        """An input's or a state's spec, its arguments checked by their rules (args.py)."""
        fn = f"Graph.{kind}"
        args.text(fn, "name", name)
        return TensorSpec(args.shape(fn, "shape", shape), args.dtype_name(fn, "dtype", dtype))

    def _out_values(self, out, where: str) -> tuple[str, ...]:
        """`out=` in a graph: state values (or views of one) that the op writes in place, every run."""
        given = out if isinstance(out, (tuple, list)) else (out,)
        if not given:
            # out=() made a node with an output of its own, as if out= were not given; the op run immediately
            # refuses it (ShapeError 'out= has 0 tensors')
            raise ShapeError(f"{where}: out={out!r} names no value; give the state value(s) the op writes, or leave "
                             f"out= None for a value of its own")
        names = []
        for v in given:
            if not isinstance(v, Value) or v.graph is not self:
                raise GraphError(f"{where}: out= must be values of this graph, got {v!r}")
            if self.base[v.name] not in self.states:
                raise GraphError(f"{where}: out= {v.name!r} is not a state (g.state); a graph writes in place only "
                                 f"into program-owned state buffers")
            names.append(v.name)
        return tuple(names)

    def _specs(self, names):
        return tuple(None if v is None else self.values[v].spec for v in names)

    def add(self, node: Node, specs: tuple | None = None) -> Node:
        """Add a node (the builder's and from_json's one path). Its outputs are named `node:i` when not given.
        Raises naming the node: duplicate names, unknown ops or inputs, cycles, and the op's own infer errors.

        node: the Node. specs: the output specs of a source node (input, state); None: inferred by the op.
        """
        where = f"graph {self.name!r}, node {node.name!r} ({node.op})"
        if node.name in self.nx:
            raise GraphError(f"{where}: a node with this name exists")
        for i, v in enumerate(node.inputs):
            if v is None:
                continue
            if v in node.outputs:
                raise GraphError(f"{where}: cycle: input {i} ({v!r}) is the node's own output")
            if v not in self.values:
                raise GraphError(f"{where}: unknown input {i} ({v!r}); the graph has no value of that name")
        if node.op in SOURCE_OPS:
            if node.inputs or len(node.outputs) != 1 or specs is None:
                raise GraphError(f"{where}: an {node.op} node takes no inputs and makes one value")
            out_specs = tuple(specs)
        else:
            op = OPS.get(node.op)
            if op is None:
                raise GraphError(f"{where}: unknown op; registered ops are {sorted(OPS)}")
            try:
                out_specs = tuple(op.infer(node.params, self._specs(node.inputs)))
            except WgraphError as e:
                raise _node_error(e, where) from None
            except (TypeError, ValueError, AttributeError) as e:  # e.g. params of the wrong class
                raise GraphError(f"{where}: {type(e).__name__}: {e}") from None
            if specs is not None and tuple(specs) != out_specs:
                raise GraphError(f"{where}: declared output specs {specs} differ from the op's {out_specs}")
            if node.op in SOURCE_OPS or OPS[node.op].is_view:
                if node.writes:
                    raise GraphError(f"{where}: a {node.op} node cannot write out= values")
        if node.writes:
            for v in node.writes:
                if v not in self.values:
                    raise GraphError(f"{where}: unknown out= value {v!r}")
                if self.base[v] not in self.states:   # as the builder's out= (a JSON file is checked the same)
                    raise GraphError(f"{where}: out= value {v!r} is not a state (or a view of one); an op writes "
                                     f"in place only into state the program owns")
            have = tuple(self.values[v].spec for v in node.writes)
            if have != out_specs:
                raise GraphError(f"{where}: out= values are {[f'{s.dtype}{list(s.shape)}' for s in have]}; the op "
                                 f"makes {[f'{s.dtype}{list(s.shape)}' for s in out_specs]}")
            # out= a state the node also reads (add(s, x, out=s), or a view of s): the op run immediately refuses it
            # at the call (one dispatch would write and bind one buffer again); here it was refused only at compile,
            # so the graph (and its JSON) held a node no program could run
            written = {self.base[v]: v for v in node.writes}
            for i, v in enumerate(node.inputs):
                if v is not None and self.base[v] in written:
                    raise AliasingError(f"{where}: {OPS[node.op].input_name(i)} ({v!r}) and out= "
                                        f"({written[self.base[v]]!r}) are one buffer (the state {self.base[v]!r}; views "
                                        f"count), which the node would write and read again, as the op run immediately "
                                        f"refuses: give out= a state of its own")
            out_specs = ()
        outputs = tuple(node.outputs) or tuple(f"{node.name}:{i}" for i in range(len(out_specs)))
        if len(outputs) != len(out_specs):
            raise GraphError(f"{where}: names {len(outputs)} outputs, the op makes {len(out_specs)}")
        for v in outputs:
            if v in self.values:
                raise GraphError(f"{where}: output {v!r} is already a value of the graph")
        node = attrs.evolve(node, outputs=outputs)

        self.nx.add_node(node.name, node=node)
        self._order[node.name] = len(self._order)
        for v in node.inputs:
            if v is not None:
                self._edge(self.producer[v], node.name, v)
        is_view = node.op not in SOURCE_OPS and OPS[node.op].is_view
        for v, s in zip(outputs, out_specs):
            self.values[v] = Value(s.shape, s.dtype, graph=self, name=v)
            head, colon, index = v.rpartition(":")
            if colon and index.isdigit():
                self._result_heads.add(head)
            self.producer[v] = node.name
            self.base[v] = self.base[node.inputs[0]] if is_view else v
        self._order_in_place(node)
        # Every edge added above ends at the new node, and it has no outgoing edges yet: a cycle could only be
        # a self-loop, which the input check rejects. So the graph stays acyclic without a global search.
        return node

    def _edge(self, src: str, dst: str, value: str | None):
        if src == dst:
            return
        if self.nx.has_edge(src, dst):
            if value is not None:
                self.nx.edges[src, dst]["values"].append(value)
            return
        self.nx.add_edge(src, dst, values=[value] if value is not None else [])

    def _order_in_place(self, node: Node):
        """A node that writes in place — an op with no outputs (kv_append into a cache) writes the buffers it
        takes, an op given `out=` writes those, an op's `writes_inputs` (rope_kv_append's caches) — is ordered
        after every earlier reader and writer of the buffers it writes; later readers and writers after it."""
        if node.op in SOURCE_OPS:
            return
        in_place = len(node.outputs) == 0 and not node.writes
        taken = {self.base[v] for v in node.inputs if v is not None}
        written = {self.base[v] for v in node.writes} | (taken if in_place else set())
        written |= {self.base[node.inputs[i]] for i in OPS[node.op].writes_inputs if node.inputs[i] is not None}
        for v in taken | written:
            writer = self._last_writer.get(v)
            if writer is not None:
                self._edge(writer, node.name, None)
            if v in written:
                for reader in self._readers.get(v, []):
                    self._edge(reader, node.name, None)
                self._last_writer[v] = node.name
                self._readers[v] = []
            else:
                self._readers.setdefault(v, []).append(node.name)

    # ---- reading ----

    def node(self, name: str) -> Node:
        """The node called `name`; GraphError naming the graph's nodes otherwise.

        name: the node's name.
        """
        # np.str_ by its characters: the names are plain strs (args.text)
        key = args.plain_str(name)
        if key is None or key not in self.nx:
            raise GraphError(f"graph {self.name!r}: node(name={show(name)}): no such node; nodes: "
                             f"{self.topological_order()}")
        return self.nx.nodes[key]["node"]

    def topological_order(self) -> list[str]:
        """Node names in a deterministic topological order (ties broken by insertion order)."""
        import networkx as nx

        return list(nx.lexicographical_topological_sort(self.nx, key=self._order.__getitem__))

    def consumers(self, value: str) -> list[str]:
        """The nodes that take value `value` as an input.

        value: a value's name.
        """
        # np.str_ by its characters: the names are plain strs (args.text)
        plain = args.plain_str(value)
        if plain is None or plain not in self.producer:
            raise GraphError(f"graph {self.name!r}: consumers(value={show(value)}): no such value")
        value = plain
        return [n for n in self.nx.successors(self.producer[value]) if value in self.node(n).inputs]

    def compile(self, device: Device | None = None, *, shared_states: dict[str, Tensor] | None = None) -> Program:
        """Plan every node once: a Program that runs the whole graph in one submit. `shared_states` {state name:
        Tensor} gives states buffers the program does not own (another program's weights): used as they are.

        device: the Device to run on; None: the default device.
        shared_states: {state name: Tensor} buffers the program uses instead of its own (another program's weights).
        """
        if device is not None and not isinstance(device, Device):
            raise args.fail("Graph.compile", "device", device, "None (the default device) or a wgraph Device")
        device = device or default_device()
        with device.lock:  # compile creates pipelines, bind groups and buffers: one thread at a time
            return Program(self, device, shared_states)

    def to_dot(self) -> str:
        """The graph in Graphviz DOT: nodes with their op, edges with the values they carry."""
        return export.graph_to_dot(self)

    def to_json(self) -> str:
        """The graph as JSON (nodes, params, inputs, states with their init data): Graph.from_json reads it."""
        return export.graph_to_json(self)

    @classmethod
    def from_json(cls, text: str) -> Graph:
        """A graph from Graph.to_json's text; every field is checked (a file never runs code).

        text: the JSON text."""
        return export.graph_from_json(cls, text)

    def __len__(self) -> int:
        return self.nx.number_of_nodes()

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, nodes={len(self)}, inputs={list(self.inputs)}, outputs={list(self.outputs)})"
