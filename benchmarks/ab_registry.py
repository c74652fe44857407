"""What the A/B scripts of this folder share (run from the project root, which puts this folder on sys.path): a
copy of wgraph/shaders/ that experimental registry entries are added to, every kernel's entry expanded from it
(matrix rows applied), and an entry written back as TOML. Import it before wgraph reads a registry."""
import json
import os
import shutil
import sys
import tomllib
from pathlib import Path


def copy_shaders(dst: Path) -> dict:
    """wgraph/shaders/ copied to `dst`; returns {kernel name: its expanded registry entry} read from the copy."""
    from wgraph.kernels.registry import expand_variant  # reads no registry

    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree("wgraph/shaders", dst)
    files = [tomllib.loads(f.read_text()) for f in sorted((dst / "registry").glob("*.toml"))]
    matrices = {k: v for f in files for k, v in f.get("matrix", {}).items()}
    return {n: e for f in files for name, entry in f.get("variants", {}).items()
            for n, e in expand_variant(name, entry, matrices).items()}


def toml_value(v) -> str:
    """A TOML value (bool, number, string, list, inline table)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML value for {v!r}")


def toml_entry(name: str, entry: dict) -> str:
    """Registry entry `name` as a [variants.name] table."""
    return f"[variants.{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in entry.items())


def env_list(name: str, parse):
    """Environment variable `name` as a tuple of `parse`d comma-separated values (HEADS="32/8,16/16"), or None."""
    return tuple(parse(v) for v in os.environ[name].split(",")) if os.environ.get(name) else None


def sub(text: str, old: str, new: str, count: int = 1) -> str:
    """`text` with `old` (which must occur `count` times: else the planned kernel changed and an ablation made from
    it would silently measure something else) replaced by `new`. The ablation scripts' one edit rule."""
    found = text.count(old)
    if found != count:
        raise SystemExit(f"ablation: {old!r} occurs {found} times in the planned kernel's WGSL, expected {count}; "
                         f"update {Path(sys.argv[0]).name} to the kernel")
    return text.replace(old, new)
