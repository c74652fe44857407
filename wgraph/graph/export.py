"""Graphviz DOT of a graph or a compiled program, and a JSON round trip of a graph. Ops are stored by their
registered name; params (attrs classes) by class path and fields; state/const data as base64 bytes."""

from __future__ import annotations

import base64
import binascii
import functools
import importlib
import json
import pkgutil

import attrs
import numpy as np

from wgraph import args
from wgraph.args import show
from wgraph.graph.nodes import GraphError, Node, StateSpec
from wgraph.tensor import TensorSpec

FORMAT = "wgraph.graph/1"
# ops that files of this format held once and that no longer exist, with what replaced them: named in the error
# (their nodes could not be checked as the ops that replaced them are)
RETIRED_OPS = {
    "attention_kvcache_append": "attention_kvcache with k_new / v_new is one attention_kvcache_new_rows node, whose "
                                "seqlen_add is checked against its own k_new (as two nodes, a file could set it out of "
                                "step with the append); build the graph again and save it",
    "kv_write": "kv_append (and kv_append_quantized) is one node of that name, whose one params place the k rows "
                "and the v rows (as two kv_write nodes, a file or Program.update could move the k rows and leave the "
                "v rows at the old position); build the graph again and save it",
}


def _q(s: str) -> str:
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _spec_text(v) -> str:
    return f"{v.dtype}[{','.join(map(str, v.shape))}]"


def _dot(g, label_of, order: list[str], outputs: dict[str, str]) -> str:
    """`order`: the nodes to draw, in order; `outputs`: {output name: value}. A program's are those it was compiled
    with: its graph may have grown since, and nodes it never runs are not drawn as its own."""
    lines = [f"digraph {_q(g.name)} {{", "  rankdir=TB;", "  node [shape=box, fontname=monospace];"]
    drawn = set(order)
    for n in order:
        node = g.node(n)
        shape = {"input": "ellipse", "state": "cylinder"}.get(node.op, "box")
        lines.append(f"  {_q(n)} [label={_q(label_of(node))}, shape={shape}];")
    for a, b, data in g.nx.edges(data=True):
        if a not in drawn or b not in drawn:
            continue
        if data["values"]:
            # a real newline, as the node labels have: _q doubles backslashes, so "\\n" reached Graphviz as an
            # escaped backslash and an "n", shown as the text \n instead of a line break
            text = "\n".join(f"{v} {_spec_text(g.values[v])}" for v in data["values"])
            lines.append(f"  {_q(a)} -> {_q(b)} [label={_q(text)}];")
        else:
            lines.append(f"  {_q(a)} -> {_q(b)} [style=dashed, label=\"order\"];")
    taken = set(g.nx)
    for name, v in outputs.items():
        # an output's own DOT node: "out:y" unless a node (an input named "out:y") or another output has that id,
        # which DOT would merge into one node
        oid = "out:" + name
        while oid in taken:
            oid = "out:" + oid
        taken.add(oid)
        lines.append(f"  {_q(oid)} [label={_q(name)}, shape=ellipse, style=bold];")
        lines.append(f"  {_q(g.producer[v])} -> {_q(oid)} [label={_q(_spec_text(g.values[v]))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def graph_to_dot(g) -> str:
    return _dot(g, lambda node: f"{node.name}\n{node.op}", g.topological_order(), g.outputs)


def program_to_dot(prog) -> str:
    variants: dict[str, list[str]] = {}
    for r in prog.rows:
        variants.setdefault(r.node, []).append(f"{r.variant} {r.workgroups}")
    slots = prog.memory_plan_slots

    def label(node):
        extra = variants.get(node.name, [])
        bufs = [f"{v} -> slot{slots[v]}" for v in node.outputs if v in slots]
        return "\n".join([node.name, node.op] + extra + bufs)

    return _dot(prog.graph, label, prog.order, prog.outputs)


# ---- JSON ----

@functools.cache
def param_classes() -> dict[str, type]:
    """The closed table of classes a graph file may name: the attrs classes named `*Params` that wgraph.ops'
    own modules define, by "module:qualname". from_json builds only these; it imports no module a file names."""
    import wgraph.ops

    table = {}
    for info in pkgutil.iter_modules(wgraph.ops.__path__):
        module = importlib.import_module(f"wgraph.ops.{info.name}")
        for obj in vars(module).values():
            if (isinstance(obj, type) and attrs.has(obj) and obj.__module__ == module.__name__
                    and obj.__name__.endswith("Params")):
                table[f"{obj.__module__}:{obj.__qualname__}"] = obj
    return table


def _class_name(cls: type) -> str:
    name = f"{cls.__module__}:{cls.__qualname__}"
    if param_classes().get(name) is not cls:
        raise GraphError(f"to_json: params class {name} is not one of wgraph's op param classes (wgraph.ops), "
                         f"which are all a graph file may name")
    return name


def _enc(x):
    if attrs.has(type(x)):
        cls = type(x)
        return {"__attrs__": _class_name(cls),
                "fields": {f.name: _enc(getattr(x, f.name)) for f in attrs.fields(cls) if f.init}}
    if isinstance(x, tuple):
        return {"__tuple__": [_enc(i) for i in x]}
    if isinstance(x, list):
        return [_enc(i) for i in x]
    if isinstance(x, dict):
        return {"__dict__": [[_enc(k), _enc(v)] for k, v in x.items()]}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise GraphError(f"to_json: cannot serialise a param value of type {type(x).__name__}: {x!r}")


def _dec(x):
    if isinstance(x, list):
        return [_dec(i) for i in x]
    if isinstance(x, dict):
        if "__tuple__" in x:
            if not isinstance(x["__tuple__"], list):
                raise GraphError(f"from_json: __tuple__ holds {show(x['__tuple__'])}, not a list")
            return tuple(_dec(i) for i in x["__tuple__"])
        if "__dict__" in x:
            pairs = x["__dict__"]
            if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
                raise GraphError(f"from_json: __dict__ holds {show(pairs)}, not a list of [key, value] pairs")
            out = {}
            for k, v in pairs:
                k = _dec(k)
                try:
                    out[k] = _dec(v)
                except TypeError:  # an unhashable key
                    raise GraphError(f"from_json: a __dict__ key {show(k)} is not a plain value") from None
            return out
        if "__attrs__" in x:
            name = x["__attrs__"]
            cls = param_classes().get(name) if isinstance(name, str) else None
            if cls is None:
                raise GraphError(f"from_json: {name!r} is not one of wgraph's op param classes; a graph file may "
                                 f"name only those ({len(param_classes())} classes of wgraph.ops)")
            fields = x.get("fields")
            if not isinstance(fields, dict):
                raise GraphError(f"from_json: {name} needs a 'fields' object, got {fields!r}")
            try:
                return cls(**{k: _dec(v) for k, v in fields.items()})
            except (TypeError, ValueError) as e:
                raise GraphError(f"from_json: cannot build {name} from fields {sorted(fields)}: {e}") from None
        raise GraphError(f"from_json: unexpected object {sorted(x)}")
    return x


def graph_to_json(g) -> str:
    nodes = []
    for n in g.topological_order():
        node = g.node(n)
        entry = {"name": node.name, "op": node.op, "inputs": list(node.inputs), "outputs": list(node.outputs)}
        if node.writes:
            entry["writes"] = list(node.writes)
        if node.op == "input":
            spec = g.inputs[n]
            entry.update(shape=list(spec.shape), dtype=spec.dtype)
        elif node.op == "state":
            st = g.states[n]
            entry.update(shape=list(st.spec.shape), dtype=st.spec.dtype,
                         init=None if st.init is None else base64.b64encode(st.init).decode())
        else:
            entry["params"] = _enc(node.params)
        nodes.append(entry)
    return json.dumps({"format": FORMAT, "name": g.name, "nodes": nodes, "outputs": g.outputs}, indent=1)


def _field(entry: dict, key: str, kind: type, where: str, default=...):
    """entry[key], which must be a `kind` (a missing key is an error unless a default is given)."""
    if key not in entry:
        if default is not ...:
            return default
        raise GraphError(f"{where}: the {key!r} field is missing")
    value = entry[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise GraphError(f"{where}: {key}={show(value)} must be a {kind.__name__}")
    return value


def _names(entry: dict, key: str, where: str, optional: bool = False) -> tuple:
    """entry[key]: a list of value names (strings; None too where `optional`: an absent optional input)."""
    values = _field(entry, key, list, where, [])
    for v in values:
        if not (isinstance(v, str) or (optional and v is None)):
            raise GraphError(f"{where}: {key} holds {show(v)}; each must be a value name (a string)"
                             + (" or null" if optional else ""))
    return tuple(values)


def _check_indirect_inits(g) -> None:
    """A state's init that a node reads as its `indirect=` workgroup counts (scale / add / mul) may ask for at most
    the workgroups the node's data needs (x * y * z <= its direct layout's): the numbers come from the file, and
    counts of 65535 x 65535 x 1 over 1024 elements made a run of 4.3e9 workgroups that did not end (~55 minutes
    on lavapipe). Counts a kernel writes at run time are the program's own (docs/ops.md)."""
    from wgraph.ops.elementwise import OPDEFS, direct_workgroups

    for _, node in g.nx.nodes(data="node"):
        op = OPDEFS.get(node.op)
        if op is None or "indirect?" not in op.inputs:
            continue
        i = op.inputs.index("indirect?")
        value = node.inputs[i] if i < len(node.inputs) else None
        state = g.states.get(g.base.get(value, value)) if value is not None else None
        if state is None or state.init is None:
            continue
        counts = np.frombuffer(state.init[:12], "<u4").astype(np.int64)   # a view of a state starts at its start
        out = g.values[node.outputs[0]].spec
        need = direct_workgroups(node.op, out)
        if int(np.prod(counts)) > need:
            raise GraphError(f"from_json: node {node.name!r} reads state {state.name!r} as its indirect workgroup "
                             f"counts, whose init asks for {' x '.join(map(str, counts))} workgroups; its "
                             f"{out.size} elements need {need} (a file's counts may ask for no more)")


def graph_from_json(graph_class, text: str):
    """A `graph_class` (Graph) rebuilt from graph_to_json's text, every node through its `add`. Every field is checked (type, name, shape, size): a malformed or hostile
    file raises GraphError (or the op's own error, prefixed with the node) naming the field and the value."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise GraphError(f"from_json: text must be a JSON string, got {type(text).__name__}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise GraphError(f"from_json: text is not a JSON document ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict):
        raise GraphError(f"from_json: text holds a JSON {type(data).__name__}; a graph file is a JSON object")
    if data.get("format") != FORMAT:
        raise GraphError(f"from_json: format {show(data.get('format'))}, expected {FORMAT!r}")
    g = graph_class(_field(data, "name", str, "from_json"))
    nodes = _field(data, "nodes", list, "from_json")
    for i, entry in enumerate(nodes):
        if not isinstance(entry, dict):
            raise GraphError(f"from_json: node {i} must be a JSON object, got {show(entry)}")
        name = _field(entry, "name", str, f"from_json: node {i}")
        where = f"from_json: node {name!r}"
        op = _field(entry, "op", str, where)
        outputs = _names(entry, "outputs", where)
        if op in ("input", "state"):
            if outputs != (name,):
                raise GraphError(f"{where}: an {op} node makes one value named as the node, got outputs {outputs}")
            spec = TensorSpec(args.shape(where, "shape", entry.get("shape")),
                              args.dtype_name(where, "dtype", entry.get("dtype")))
            node = Node(name, op, None, (), outputs)
            g.add(node, specs=(spec,))
            if op == "input":
                g.inputs[node.name] = spec
            else:
                init = entry.get("init")
                if init is not None:
                    if not isinstance(init, str):
                        raise GraphError(f"{where}: init={show(init)} must be base64 text or null")
                    try:
                        init = base64.b64decode(init, validate=True)
                    except (binascii.Error, ValueError) as e:
                        raise GraphError(f"from_json: state {node.name!r}: init is not base64 ({e})") from None
                    if len(init) != spec.nbytes:
                        raise GraphError(f"from_json: state {node.name!r} is {spec.shape} {spec.dtype} "
                                         f"({spec.nbytes} bytes); its init holds {len(init)} bytes")
                g.states[node.name] = StateSpec(node.name, spec, init)
        else:
            if op in RETIRED_OPS:
                raise GraphError(f"{where}: op {op!r} is no longer read: {RETIRED_OPS[op]}")
            if "params" not in entry:
                raise GraphError(f"{where}: the 'params' field is missing")
            try:
                params = _dec(entry["params"])
            except RecursionError:
                raise GraphError(f"{where}: its params nest deeper than Python decodes") from None
            g.add(Node(name, op, params, _names(entry, "inputs", where, optional=True), outputs,
                       _names(entry, "writes", where)))
    g._counter = len(nodes)
    _check_indirect_inits(g)
    for out_name, v in _field(data, "outputs", dict, "from_json").items():
        if not isinstance(v, str) or v not in g.values:
            raise GraphError(f"from_json: output {out_name!r} names value {show(v)}, which the graph does not have")
        g.output(out_name, g.values[v])
    return g
