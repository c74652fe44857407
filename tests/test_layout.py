"""The package's layout, read from its source: no import circle (module level or inside functions), one module
that calls the GPU queue (scheduler/queue.py), a Device that delegates submission to its scheduler, and bench scripts
and examples that import only what the package has."""

import ast
import functools
from pathlib import Path

import networkx as nx

import wgraph
from wgraph.device import Device

PACKAGE = Path(wgraph.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


@functools.cache
def _trees() -> dict[str, tuple[Path, ast.AST]]:
    """Each module's path and parsed source, read once for the tests below (each parsed the whole package: ~0.6 s
    each on the CI machine); the trees are only walked, never changed."""
    return {name: (path, ast.parse(path.read_text(), str(path))) for name, path in _modules().items()}


def _imports(tree: ast.AST, module: str, is_package: bool, modules):
    """The modules a module imports, at any depth of it, skipping `if TYPE_CHECKING:` blocks (never run).
    `from pkg import sub` depends on the submodule, not on the package (a parent package is imported first
    for any of its modules anyway); `from pkg import name` on the package."""
    package = module if is_package else module.rpartition(".")[0]
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                yield f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
        stack.extend(ast.iter_child_nodes(node))


def _import_graph() -> nx.DiGraph:
    modules = _trees()
    g = nx.DiGraph()
    g.add_nodes_from(modules)
    for name, (path, tree) in modules.items():
        for target in _imports(tree, name, path.name == "__init__.py", modules):
            if target in modules and target != name:
                g.add_edge(name, target)
    return g


def test_the_import_walk_sees_the_package():
    g = _import_graph()
    assert {"wgraph.device", "wgraph.scheduler.queue", "wgraph.graph.program", "wgraph.ops.core"} <= set(g)
    assert g.has_edge("wgraph.device", "wgraph.scheduler.queue")
    assert g.has_edge("wgraph.graph.graph", "wgraph.graph.program")  # Graph.compile makes a Program
    assert g.has_edge("wgraph.ops.attention_planner", "wgraph.ops.attention_loops")  # inside a function


def test_the_package_has_no_import_cycle():
    cycles = sorted(nx.simple_cycles(_import_graph()), key=len)
    assert not cycles, f"import circles: {cycles[:5]}"


def _queue_calls(tree: ast.AST) -> list[int]:
    """Lines that submit to or write the wgpu queue: `<...>.queue.submit/write_buffer(...)`, `queue.submit(...)`,
    `submit_for_index(...)`."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "submit_for_index":
            lines.append(node.lineno)
        elif isinstance(f, ast.Attribute) and f.attr in ("submit", "write_buffer"):
            owner = f.value
            if (isinstance(owner, ast.Attribute) and owner.attr == "queue") or (
                    isinstance(owner, ast.Name) and owner.id == "queue"):
                lines.append(node.lineno)
    return lines


def test_only_the_scheduler_calls_the_queue():
    """Queue writes and submits keep the order of the calls only if one module makes them all (it flushes the
    pending immediate ops first). The host bench's raw-wgpu floor bypasses wgraph on purpose."""
    found = {}
    for name, (_, tree) in _trees().items():
        lines = _queue_calls(tree)
        if lines:
            found[name] = lines
    assert set(found) == {"wgraph.scheduler.queue", "wgraph.bench.host"}, found


def test_device_delegates_submission():
    methods = [k for k, v in vars(Device).items() if callable(v) or isinstance(v, property)]
    assert len(methods) <= 20, sorted(methods)
    assert not {"pending", "recording", "queue_write", "submit", "take_pending"} & set(methods)


def _wgraph_names(tree: ast.AST):
    """(module, name or None) for each `import wgraph...` / `from wgraph... import name` of a script."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((a.name, None) for a in node.names if a.name.split(".")[0] == "wgraph")
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "wgraph":
            yield from ((node.module, a.name) for a in node.names)


def test_scripts_import_what_the_package_has():
    """The bench scripts and examples run rarely (on a GPU, by hand); a name the package dropped or moved must fail
    here, not on the GPU machine (benchmarks/prefill_cpu.py imported a removed helper for days)."""
    import importlib

    root = PACKAGE.parent
    scripts = sorted((root / "benchmarks").glob("*.py")) + sorted((root / "examples").glob("*.py"))
    checked, missing = 0, []
    for path in scripts:
        for module, name in _wgraph_names(ast.parse(path.read_text(), str(path))):
            mod = importlib.import_module(module)
            if name is not None and not hasattr(mod, name):
                try:   # `from wgraph.bench import gemv`: a submodule
                    importlib.import_module(f"{module}.{name}")
                except ModuleNotFoundError:
                    missing.append(f"{path.relative_to(root)}: {module}.{name}")
            checked += 1
    assert checked > 50 and not missing, missing
