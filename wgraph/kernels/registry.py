"""The kernel registry: `shaders/registry.toml` loaded into frozen `Kernel` records, each with the facts
derived from its WGSL (bindings, uniform layout, workgroup memory). Loading checks files and entry points."""

from __future__ import annotations

import functools
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

    @property
    def threads(self) -> int:
        x, y, z = self.workgroup_size
        return x * y * z

    def const(self, name: str) -> int:
        """The shader's integer const `name` (a tile size, a chunk step): PlanError if it declares none."""
        value = self.consts.get(name)
        if value is None:
            raise PlanError(f"kernel {self.name} declares no integer const {name}")
        return value

    @property
    def storage_bindings(self) -> tuple[wgsl.BindingDecl, ...]:
        return tuple(b for b in self.bindings if b.space == "storage")


def _kernel_from_entry(name: str, entry: dict, shader_dir: Path) -> Kernel:
    where = f"registry variant {name}"
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
    defines = {str(k): str(v) for k, v in entry.get("defines", {}).items()}
    defines.update({k.upper(): str(v) for k, v in limits.items()})
    defines["WORKGROUP_SIZE"] = ", ".join(map(str, size))
    defines.update(WORKGROUP_SIZE_X=str(size[0]), WORKGROUP_SIZE_Y=str(size[1]), WORKGROUP_SIZE_Z=str(size[2]))
    source = wgsl.preprocess(path.read_text(), defines, shader_dir, f"{where} ({entry['file']})")

    entries = wgsl.parse_entry_points(source)
    if entry["entry"] not in entries:
        raise RegistryError(f"{where}: entry point {entry['entry']!r} not found in {entry['file']}; has {sorted(entries)}")
    consts = wgsl.parse_consts(source)
    declared = tuple(wgsl.eval_int(p, consts) for p in entries[entry["entry"]].split(",") if p.strip())
    declared = declared + (1,) * (3 - len(declared))
    if declared != size:
        raise RegistryError(f"{where}: registry workgroup_size {size} but {entry['file']} declares {declared}")

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
    )


def load_registry(path: Path | None = None, shader_dir: Path | None = None) -> MappingProxyType:
    """Load every variant of a registry file (default: the package's) into {name: Kernel}."""
    shader_dir = shader_dir or SHADER_DIR
    path = path or shader_dir / "registry.toml"
    try:
        data = tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as e:
        raise RegistryError(f"{path}: not valid TOML: {e}") from None
    variants = data.get("variants", {})
    return MappingProxyType({name: _kernel_from_entry(name, entry, shader_dir) for name, entry in variants.items()})


# Variants described by Python tables instead of TOML entries (the elementwise ops build one per row and
# dtype of their table: wgraph/ops/elementwise.py). Same keys as a TOML entry; added at import time.
_GENERATED: dict[str, dict] = {}


def add_generated_variants(entries: dict[str, dict]) -> None:
    """Add variants (name -> entry with registry.toml's keys) to the package registry."""
    for name in entries:
        if name in _GENERATED:
            raise RegistryError(f"generated variant {name} is added twice")
    _GENERATED.update(entries)
    for cached in (registry, kernels_for, _select):
        cached.cache_clear()


@functools.cache
def registry() -> MappingProxyType:
    """The package's registry (registry.toml plus the generated variants), loaded once."""
    kernels = dict(load_registry())
    for name, entry in _GENERATED.items():
        if name in kernels:
            raise RegistryError(f"variant {name} is both in registry.toml and generated")
        kernels[name] = _kernel_from_entry(name, entry, SHADER_DIR)
    return MappingProxyType(kernels)


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
    choices = [dict(k.facts, output_dtype=k.output_dtype) for k in kernels_for(op)]
    raise DtypeError(f"{op} has no kernel for {dict(facts)}; the registry has {choices}")
