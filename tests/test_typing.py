"""The public API is typed and documented: every public callable (the API walk's list: wg.ops' exports, the public
methods of Device, Tensor, Graph, Program and the models) annotates each parameter and its result and names each
parameter in its docstring; the package ships py.typed; `python -m mypy examples/` passes (pyproject's [tool.mypy])
and finds the mistakes the annotations exist for. mypy is in the `test` extra: a missing mypy fails here."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import wgraph as wg
from test_api_walk import _callable, _public

ROOT = Path(__file__).resolve().parents[1]

# Mistakes a type checker must find in user code, with the message mypy gives (one per line of BAD_USAGE).
BAD_USAGE = '''\
import numpy as np
import wgraph as wg

dev = wg.default_device()
q = dev.tensor(np.ones((2, 2, 8), np.float32))
g = wg.Graph("g")
x = g.input("x", (4,))
out = wg.ops.attention(q, q, q)
y = wg.ops.scale(q, "2")
z: wg.Tensor = wg.ops.silu(x)
s: str = q.numpy()
x.numpy()
'''
EXPECTED = [
    (8, r'Missing named argument "causal" for "attention"'),
    (9, r'Argument 2 to "scale" has incompatible type "str"; expected "float"'),
    (10, r'Incompatible types in assignment \(expression has type "Value", variable has type "Tensor"\)'),
    (11, r'Incompatible types in assignment \(expression has type "ndarray\[.*\]", variable has type "str"\)'),
    (12, r'"Value" has no attribute "numpy"'),
]


def _signature(name: str) -> tuple[inspect.Signature, str]:
    """The signature (of __init__ for a class) and the docstring that documents its parameters (a class's own
    docstring and its __init__'s)."""
    fn = _callable(name)
    if inspect.isclass(fn):
        doc = (inspect.getdoc(fn) or "") + "\n" + (inspect.getdoc(fn.__init__) if "__init__" in vars(fn) else "")
        return inspect.signature(fn.__init__), doc
    return inspect.signature(fn), inspect.getdoc(fn) or ""


def _params(sig: inspect.Signature) -> list[inspect.Parameter]:
    return [p for p in sig.parameters.values() if p.name not in ("self", "cls")]


def test_public_api_list_is_not_empty():
    """The checks below walk this list: it must hold the API (a broken import would make them pass vacuously)."""
    names = _public()
    assert {"ops.attention", "Device.tensor", "Graph.input", "Program.run", "Llama.generate"} <= names
    assert len(names) > 100


def test_every_parameter_is_documented():
    """help(f) explains each of f's parameters: its name appears (as a word) in the docstring."""
    missing = {}
    for name in sorted(_public()):
        sig, doc = _signature(name)
        absent = [p.name for p in _params(sig) if not re.search(rf"(?<![A-Za-z0-9_]){re.escape(p.name)}(?![A-Za-z0-9_])",
                                                                  doc)]
        if absent or not doc.strip():
            missing[name] = absent or ["<no docstring>"]
    assert not missing, f"parameters not named in the docstring: {missing}"


def _namespace() -> dict[str, object]:
    """Everything a user meets from `wgraph`, `wgraph.ops` and `wgraph.models`: their exports, and each exported
    class's own public functions, methods and properties (a property as its getter)."""
    import wgraph.models as models

    found: dict[str, object] = {}
    for prefix, mod in (("wg", wg), ("wg.ops", wg.ops), ("wg.models", models)):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.ismodule(obj) or any(obj is seen for seen in found.values()):
                continue
            found[f"{prefix}.{name}"] = obj
            for member, v in vars(obj).items() if inspect.isclass(obj) else ():
                f = v.fget if isinstance(v, property) else getattr(v, "__func__", v)
                if not member.startswith("_") and inspect.isfunction(f):
                    found[f"{prefix}.{name}.{member}"] = f
    return found


def test_everything_public_has_a_docstring():
    """help() on anything reachable from wg, wg.ops or wg.models says what it is, and a function or method names
    each of its parameters (a class's fields are its attributes, documented where it is built)."""
    found = _namespace()
    assert {"wg.Tensor.size", "wg.Stats.since", "wg.Value.reshape", "wg.models.Tokenizer.vocab_size",
            "wg.models.open_pretrained", "wg.KernelPath.variant"} <= set(found)
    undocumented = [n for n, obj in found.items() if not (inspect.getdoc(obj) or "").strip()]
    assert not undocumented, f"no docstring: {undocumented}"
    unnamed = {}
    for name, obj in found.items():
        if inspect.isfunction(obj):
            absent = [p for p in inspect.signature(obj).parameters if p not in ("self", "cls") and not re.search(
                rf"(?<![A-Za-z0-9_]){re.escape(p)}(?![A-Za-z0-9_])", inspect.getdoc(obj) or "")]
            if absent:
                unnamed[name] = absent
    assert not unnamed, f"parameters not named in the docstring: {unnamed}"


def test_every_parameter_and_result_is_annotated():
    unannotated = {}
    for name in sorted(_public()):
        sig, _ = _signature(name)
        absent = [p.name for p in _params(sig) if p.annotation is p.empty]
        if sig.return_annotation is sig.empty:
            absent.append("return")
        if absent:
            unannotated[name] = absent
    assert not unannotated, f"parameters or results without a type annotation: {unannotated}"


def test_attention_help_explains_every_option():
    doc = inspect.getdoc(wg.ops.attention)
    for word in ("start_pos", "kv_start", "softcap", "kv_layout", "page_table", "page_size", "layer", "out",
                 "window", "return_lse", "sliding_window", "variant", "kv_len", "scale", "causal"):
        assert re.search(rf"^\s*(\w+, )*{word}\b.*: ", doc, re.M), f"help(wg.ops.attention) does not explain {word}"
    assert inspect.signature(wg.ops.attention).parameters["causal"].default is inspect.Parameter.empty


def test_package_ships_py_typed():
    assert (ROOT / "wgraph" / "py.typed").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["wgraph"]
    assert any(r.startswith("mypy") for r in pyproject["project"]["optional-dependencies"]["test"])


def test_mypy_passes_on_the_examples_and_finds_misuse(tmp_path):
    """One mypy run (pyproject's [tool.mypy]; a fresh cache, so it measures what CI pays, a few seconds): the
    examples type-check, and a file of mistakes gets exactly the errors the annotations exist for."""
    bad = tmp_path / "typing_misuse.py"
    bad.write_text(BAD_USAGE)
    run = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "examples/", str(bad)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert "No module named mypy" not in out, "mypy is in the test extra: pip install -e '.[test]'"
    errors = [line for line in out.splitlines() if ": error: " in line]
    elsewhere = [e for e in errors if "typing_misuse.py:" not in e]
    assert not elsewhere, "mypy finds errors in examples/:\n" + "\n".join(elsewhere)
    for line, message in EXPECTED:
        assert any(re.search(rf"typing_misuse\.py:{line}: error: {message}", e) for e in errors), (
            f"mypy did not report line {line} ({message}):\n{out}")
    assert len(errors) == len(EXPECTED), out
    assert run.returncode == 1, out
