"""The kernel registry: the TOML files of `shaders/registry/` (variants, and dtype matrices that expand one
variant into a kernel per row) loaded into frozen `Kernel` records, each with the facts derived from its WGSL
(bindings, uniform layout, workgroup memory). Loading checks files, keys and entry points."""

from __future__ import annotations

import functools
import re
import threading
import tomllib
from pathlib import Path
from types import MappingProxyType

import attrs

from wgraph.dtypes import DTYPES
from wgraph.errors import DtypeError, PlanError, RegistryError
from wgraph.kernels import wgsl

SHADER_DIR = Path(__file__).resolve().parent.parent / "shaders"

# Native feature names a variant may require; Device enables those of them the adapter has.
KNOWN_FEATURES = ("shader-f16", "subgroup", "timestamp-query", "timestamp-query-inside-passes")

_KNOWN_KEYS = {"file", "entry", "workgroup_size", "features", "output_dtype", "op", "defines", "limits"}
_EXPANSION_KEYS = {"matrix", "rows", "per_var", "per_row"}  # how a variant expands; not facts of its kernels
_ROW_KEYS = {"features", "output_dtype", "defines", "limits", "vars"}
_VAR = re.compile(r"\{(\w+)\}")
_ENABLES_F16 = re.compile(r"enable(?<!\wenable)\s[^;]*\bf16\b")   # `enable f16;`, `enable subgroups, f16;` (\b: wgsl._CONST)


@attrs.frozen
class Kernel:
    """One variant: what the registry says about it plus what its shader declares."""

    name: str
    op: str
    file: str
    entry: str
    workgroup_size: tuple[int, int, int]
    features: tuple[str, ...]
    output_dtype: str
    limits: MappingProxyType  # e.g. max_head_dim -> 256
    facts: MappingProxyType  # every other key of the entry: data for the op's planner
    source: str = attrs.field(repr=False)
    bindings: tuple[wgsl.BindingDecl, ...] = attrs.field(repr=False)
    uniform: wgsl.StructLayout | None = attrs.field(repr=False)
    workgroup_memory: int
    consts: MappingProxyType = attrs.field(repr=False, factory=lambda: MappingProxyType({}))  # the shader's integer consts, read once at load
    # The shader's pipeline-overridable constants (name -> WGSL type) and the values this kernel's pipelines
    # give them: a flag that picks a code path inside a hot loop (RMSNorm folded into a GEMV) is compiled in
    # instead of tested per step (the driver drops the other path; a uniform flag costs issue slots on both).
    # The registry's kernel has none set; `specialized` makes the one a dispatch runs.
    overrides: MappingProxyType = attrs.field(repr=False, factory=lambda: MappingProxyType({}))
    constants: MappingProxyType = attrs.field(factory=lambda: MappingProxyType({}))

    @property
    def threads(self) -> int:
        x, y, z = self.workgroup_size
        return x * y * z

    def const(self, name: str) -> int:
        """The shader's integer const `name` (a tile size, a chunk step): PlanError if it declares none, or
        several of different values (wgsl.parse_consts)."""
        value = self.consts.get(name)
        if value is None:
            raise PlanError(f"kernel {self.name} declares no integer const {name} (or declares it more than once, "
                            f"with different values)")
        return value

    def specialized(self, constants: dict) -> Kernel:
        """This kernel with its overridable constants set (one record per set of values, so pipelines and
        bind groups cache by identity); PlanError naming the constants missing or unknown."""
        if set(constants) != set(self.overrides):
            raise PlanError(f"kernel {self.name} declares overridable constants {sorted(self.overrides)}; got "
                            f"{sorted(constants)}")
        values = tuple(sorted((name, _constant(self, name, v)) for name, v in constants.items()))
        return _specialized(self, values) if values else self

    @property
    def storage_bindings(self) -> tuple[wgsl.BindingDecl, ...]:
        return tuple(b for b in self.bindings if b.space == "storage")


def _constant(k: Kernel, name: str, value) -> bool:
    """A flag's value (every overridable constant is a bool: the registry refuses other types at load)."""
    if isinstance(value, (bool, int)) and value in (0, 1):
        return bool(value)
    raise PlanError(f"kernel {k.name}: constant {name} is a bool, got {value!r}")


# (id of the registry's kernel, values) -> (that kernel, its specialization): holding the kernel keeps its id
# from being reused while the entry lives (Kernel records hold mappings, so they do not hash)
_SPECIALIZED: dict[tuple, tuple[Kernel, Kernel]] = {}


def _specialized(k: Kernel, values: tuple) -> Kernel:
    got = _SPECIALIZED.get((id(k), values))
    if got is None:
        got = _SPECIALIZED[(id(k), values)] = (k, attrs.evolve(k, constants=MappingProxyType(dict(values))))
    return got[1]


# The TOML type each key must have: a wrong one raised Python's TypeError or AttributeError from the loader
# (workgroup_size = 64: 'int' object is not iterable), or was taken apart (features = "subgroup": unknown feature 's')
_KEY_TYPES = {"file": (str, "a string"), "entry": (str, "a string"), "op": (str, "a string"),
              "output_dtype": (str, "a string"), "workgroup_size": (list, "an array"), "features": (list, "an array"),
              "defines": (dict, "a table"), "limits": (dict, "a table"), "rows": (list, "an array"),
              "per_var": (dict, "a table"), "per_row": (dict, "a table"), "vars": (dict, "a table")}


def _check_types(where: str, entry: dict) -> None:
    for key, value in entry.items():
        kind = _KEY_TYPES.get(key)
        if kind is not None and not isinstance(value, kind[0]):
            raise RegistryError(f"{where}: {key} = {value!r} must be {kind[1]}")


def _kernel_from_entry(name: str, entry: dict, shader_dir: Path, read) -> Kernel:
    where = f"registry variant {name}"
    _check_types(where, entry)
    for key in ("file", "entry", "workgroup_size", "output_dtype", "op"):
        if key not in entry:
            raise RegistryError(f"{where}: missing key {key!r}")
    path = shader_dir / entry["file"]
    if not path.is_file():
        raise RegistryError(f"{where}: shader file {entry['file']} does not exist in {shader_dir}")
    size = tuple(entry["workgroup_size"]) + (1,) * (3 - len(entry["workgroup_size"]))
    if len(size) != 3 or not all(isinstance(s, int) and s > 0 for s in size):
        raise RegistryError(f"{where}: workgroup_size {entry['workgroup_size']} must be 1 to 3 positive integers")
    features = tuple(entry.get("features", ()))
    for f in features:
        if f not in KNOWN_FEATURES:
            raise RegistryError(f"{where}: unknown feature {f!r}; known: {KNOWN_FEATURES}")
    if entry["output_dtype"] not in DTYPES:
        raise RegistryError(f"{where}: output_dtype {entry['output_dtype']!r} is not one of {sorted(DTYPES)}")
    limits = dict(entry.get("limits", {}))
    defines = {str(k): _define_text(where, "defines", k, v) for k, v in entry.get("defines", {}).items()}
    derived = {k.upper(): _define_text(where, "limits", k, v) for k, v in limits.items()}
    derived.update(WORKGROUP_SIZE=", ".join(map(str, size)), WORKGROUP_SIZE_X=str(size[0]),
                   WORKGROUP_SIZE_Y=str(size[1]), WORKGROUP_SIZE_Z=str(size[2]))
    # a limit (or the workgroup size) replacing a define of another value would give the shader a number the
    # entry does not say it has; an equal value is the same text either way
    clash = {n: (defines[n], v) for n, v in derived.items() if n in defines and defines[n] != v}
    if clash:
        raise RegistryError(f"{where}: defines {', '.join(f'{n}={a!r}' for n, (a, _) in clash.items())} "
                            f"disagree with the limits / workgroup_size that set "
                            f"{', '.join(f'{n}={b!r}' for n, (_, b) in clash.items())}")
    defines.update(derived)
    source = wgsl.preprocess(path.read_text(), defines, shader_dir, f"{where} ({entry['file']})", read)

    entries = wgsl.parse_entry_points(source)
    if entry["entry"] not in entries:
        raise RegistryError(f"{where}: entry point {entry['entry']!r} not found in {entry['file']}; has {sorted(entries)}")
    consts = wgsl.parse_consts(source)
    declared = tuple(wgsl.eval_int(p, consts) for p in wgsl.split_arguments(entries[entry["entry"]]))
    declared = declared + (1,) * (3 - len(declared))
    if declared != size:
        raise RegistryError(f"{where}: registry workgroup_size {size} but {entry['file']} declares {declared}")

    if "shader-f16" not in features and _ENABLES_F16.search(wgsl.strip_comments(source)):
        # the planners refuse a kernel by its features: without shader-f16 among them, a device lacking it was
        # given the kernel, and pipeline creation failed in wgpu's shader validation instead of UnsupportedError
        raise RegistryError(f"{where}: {entry['file']} enables f16 but the variant's features {list(features)} lack "
                            f"'shader-f16'")
    bindings = wgsl.parse_bindings(source, where)
    structs = wgsl.parse_structs(source)
    uniforms = [b for b in bindings if b.space == "uniform"]
    if len(uniforms) > 1 or (uniforms and uniforms[0].binding != 0):
        raise RegistryError(f"{where}: at most one uniform binding, at binding 0; found {[(b.binding, b.name) for b in uniforms]}")
    uniform = None
    if uniforms:
        if uniforms[0].type not in structs:
            raise RegistryError(f"{where}: uniform {uniforms[0].name} has type {uniforms[0].type}, not a struct of the file")
        uniform = wgsl.struct_layout(uniforms[0].type, structs, consts)

    facts = {k: v for k, v in entry.items() if k not in _KNOWN_KEYS}
    return Kernel(
        name=name,
        op=entry["op"],
        file=entry["file"],
        entry=entry["entry"],
        workgroup_size=size,
        features=features,
        output_dtype=entry["output_dtype"],
        limits=MappingProxyType(limits),
        facts=MappingProxyType(facts),
        source=source,
        bindings=bindings,
        uniform=uniform,
        workgroup_memory=wgsl.workgroup_bytes(source, structs, consts),
        consts=MappingProxyType(consts),
        overrides=MappingProxyType(_flags(where, source)),
    )


def _define_text(where: str, table: str, key: str, value) -> str:
    """The WGSL text a define (or a limit) puts in place of its placeholder. A TOML bool was written as Python spells
    it (`true` became `True`, no WGSL name: a shader-compile traceback at the first dispatch), an array or a table as
    its repr; a bool is now WGSL's `true` / `false`, and anything but a string or a number a load error."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise RegistryError(f"{where}: {table}.{key} = {value!r} is a {type(value).__name__}; a define is a string, "
                        f"a number or a bool")


def _flags(where: str, source: str) -> dict[str, str]:
    """The shader's overridable constants, all bools: flags that pick a code path (docs/kernels.md); a value
    that varies belongs in the uniforms, and every pipeline per value would be compiled on first use."""
    overrides = wgsl.parse_overrides(source)
    other = {name: kind for name, kind in overrides.items() if kind != "bool"}
    if other:
        raise RegistryError(f"{where}: overridable constants must be bool flags; {other} are not")
    return overrides


def _read_toml(path: Path) -> dict:
    try:
        data = tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as e:
        raise RegistryError(f"{path}: not valid TOML: {e}") from None
    unknown = set(data) - {"variants", "matrix"}
    if unknown:
        raise RegistryError(f"{path}: unknown top-level tables {sorted(unknown)}; a registry file holds "
                            f"[variants.*] and [matrix.*]")
    return data


def _merge(base: dict, over: dict) -> dict:
    """`over` on top of `base`: tables merged key by key, `features` joined, other keys replaced."""
    out = dict(base)
    for key, value in over.items():
        if key == "features":
            out[key] = list(dict.fromkeys([*out.get(key, []), *value]))
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def _fill_vars(value, row_vars: dict, where: str):
    """A variant's string value with each `{name}` replaced by the row's var `name`; a table's string values too
    (defines = { OUT_T = "{out}" } reached the shader as `{out}`: a load, then a shader-compile error)."""
    if isinstance(value, dict):
        return {k: _fill_vars(v, row_vars, where) for k, v in value.items()}
    if not isinstance(value, str) or "{" not in value:
        return value

    def var(m):
        if m.group(1) not in row_vars:
            raise RegistryError(f"{where}: {value!r} names {{{m.group(1)}}}, which the row does not define "
                                f"(its vars: {sorted(row_vars)})")
        return str(row_vars[m.group(1)])

    return _VAR.sub(var, value)


def _check_override(where: str, key: str, over) -> None:
    """A per_var / per_row override: a table, whose keys have their types."""
    _check_types(where, over if isinstance(over, dict) else {key: over})


def _per_var(where: str, per_var: dict, rows_vars: list[dict]) -> dict[str, dict]:
    """A variant's `per_var.<var>.<value> = { ... }` tables, checked: the var is one every row of the variant
    defines, the value one some row has (a misspelt value overrode nothing, silently), each override a table."""
    for var, values in per_var.items():
        at = f"{where}: per_var.{var}"
        _check_types(at, {"per_var": values})
        if any(var not in v for v in rows_vars):
            defined = sorted(set.intersection(*(set(v) for v in rows_vars))) if rows_vars else []
            raise RegistryError(f"{at}: not a var of every row of the variant (the vars all its rows define: "
                                f"{defined})")
        have = sorted({str(v[var]) for v in rows_vars})
        for value, over in values.items():
            if value not in have:
                raise RegistryError(f"{at}.{value}: no row of the variant has {var} = {value!r} (its values: {have})")
            _check_override(f"{at}.{value}", "per_var", over)
    return per_var


def expand_variant(name: str, entry: dict, matrices: dict) -> dict[str, dict]:
    """One registry variant as the kernel entries it makes: itself, or one per row of its matrix."""
    where = f"registry variant {name}"
    _check_types(where, entry)   # before a matrix row's features are joined with a string's characters
    if "matrix" not in entry:
        for key in ("rows", "per_var", "per_row"):
            if key in entry:
                raise RegistryError(f"{where}: {key!r} needs a matrix")
        return {name: entry}
    matrix = matrices.get(entry["matrix"])
    if matrix is None:
        raise RegistryError(f"{where}: unknown matrix {entry['matrix']!r}; defined: {sorted(matrices)}")
    rows = entry.get("rows", list(matrix))
    per_row = entry.get("per_row", {})
    for r in [*rows, *per_row]:
        if r not in matrix:
            raise RegistryError(f"{where}: matrix {entry['matrix']!r} has no row {r!r}; rows: {list(matrix)}")
    for r, over in per_row.items():
        _check_override(f"{where}: per_row.{r}", "per_row", over)
    per_var = _per_var(where, entry.get("per_var", {}), [matrix[r].get("vars", {}) for r in rows])
    own = {k: v for k, v in entry.items() if k not in _EXPANSION_KEYS}
    made = {}
    for r in rows:
        row = matrix[r]
        row_vars = row.get("vars", {})
        merged = _merge({k: v for k, v in row.items() if k != "vars"}, own)
        merged = {k: _fill_vars(v, row_vars, where) for k, v in merged.items()}
        # then the overrides of the row's var values (in per_var's order), then the row's own, last; their strings
        # fill `{name}` as the variant's do (per_row.f16 = { partner = "m_{wide}" })
        overs = [vals[value] for var, vals in per_var.items() if (value := str(row_vars[var])) in vals]
        for over in [*overs, per_row.get(r, {})]:
            merged = _merge(merged, {k: _fill_vars(v, row_vars, where) for k, v in over.items()})
        made[name.replace("{row}", r) if "{row}" in name else f"{name}_{r}"] = merged
    return made


def load_registry(registry_dir: Path | None = None, shader_dir: Path | None = None) -> MappingProxyType:
    """Every variant of the registry's TOML files (default: the package's `shaders/registry/`), expanded by
    its matrix, as {name: Kernel}. Files are read in name order and variants in file order (a planner takes
    the first match); matrices may be defined in any of the files."""
    shader_dir = shader_dir or SHADER_DIR
    registry_dir = Path(registry_dir or shader_dir / "registry")
    files = sorted(registry_dir.glob("*.toml"))
    if not files:
        raise RegistryError(f"{registry_dir}: no registry files (*.toml)")
    matrices: dict[str, dict] = {}
    variants: list[tuple[str, dict, Path]] = []
    for path in files:
        data = _read_toml(path)
        for mname, rows in data.get("matrix", {}).items():
            if mname in matrices:
                raise RegistryError(f"{path.name}: matrix {mname!r} is defined twice")
            for r, row in rows.items():
                unknown = set(row) - _ROW_KEYS
                if unknown:
                    raise RegistryError(f"{path.name}: matrix {mname!r} row {r!r} has unknown keys "
                                        f"{sorted(unknown)}; a row may set {sorted(_ROW_KEYS)}")
                _check_types(f"{path.name}: matrix {mname!r} row {r!r}", row)
            matrices[mname] = rows
        variants += [(name, entry, path) for name, entry in data.get("variants", {}).items()]
    kernels: dict[str, Kernel] = {}
    read = wgsl.include_reader()
    for name, entry, path in variants:
        for kname, kentry in expand_variant(name, entry, matrices).items():
            if kname in kernels:
                raise RegistryError(f"{path.name}: variant {kname} is defined twice")
            kernels[kname] = _kernel_from_entry(kname, kentry, shader_dir, read)
    return MappingProxyType(kernels)


_registry_lock = threading.Lock()


@functools.cache
def registry() -> MappingProxyType:
    """The package's registry, loaded once."""
    # functools.cache does not make a first call wait for another thread's: threads starting together each loaded
    # the registry (0.4 s each, under one GIL) and kept their own Kernel objects, the cache keeping the last
    with _registry_lock:
        return _loaded_registry()


@functools.cache
def _loaded_registry() -> MappingProxyType:
    return load_registry()


def kernel(name: str) -> Kernel:
    try:
        return registry()[name]
    except KeyError:
        raise PlanError(f"unknown kernel variant {name!r}; the registry has {sorted(registry())}") from None


@functools.cache
def kernels_for(op: str) -> tuple[Kernel, ...]:
    """Every variant of one op family, in registry order."""
    return tuple(k for k in registry().values() if k.op == op)


def select_variant(op: str, **facts) -> str:
    """The first registry variant of `op` whose facts (`output_dtype` included) match `facts`."""
    return _select(op, tuple(sorted(facts.items())))


@functools.cache
def _select(op: str, facts: tuple) -> str:
    for k in kernels_for(op):
        have = dict(k.facts, output_dtype=k.output_dtype)
        if all(have.get(key) == value for key, value in facts):
            return k.name
    # what was asked, and what the op takes of the same facts (each combination once)
    keys = [key for key, _ in facts]
    takes = sorted({tuple(str(dict(k.facts, output_dtype=k.output_dtype).get(key)) for key in keys)
                    for k in kernels_for(op)})
    shown = [t[0] for t in takes] if len(keys) == 1 else takes
    raise DtypeError(f"{op} has no kernel for {', '.join(f'{key}={value!r}' for key, value in facts)}; it takes "
                     f"{' x '.join(keys)} in {shown}")
