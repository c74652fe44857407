"""The shader registry: loading, derived facts, and every error it promises."""

import re
import textwrap

import numpy as np
import pytest

import wgraph as wg
from wgraph.errors import PlanError, RegistryError
from wgraph.kernels.registry import load_registry, registry

SHADER = """
struct P { n: u32, f: f32 }
@group(0) @binding(0) var<uniform> params: P;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> y: array<{{T}}>;
const TILE: u32 = 16u;
var<workgroup> tile: array<f32, TILE * 4u>;
var<workgroup> acc: vec4<f32>;
@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) { y[gid.x] = x[gid.x] * {{T}}(params.f); }
"""


def write(tmp_path, toml, shader=SHADER, name="k.wgsl", *more_toml):
    (tmp_path / name).write_text(shader)
    reg = tmp_path / "registry"
    reg.mkdir(exist_ok=True)
    for i, text in enumerate((toml, *more_toml)):
        (reg / f"f{i}.toml").write_text(textwrap.dedent(text))
    return load_registry(reg, tmp_path)


GOOD = """
[variants.k_f32]
op = "test"
file = "k.wgsl"
entry = "main"
workgroup_size = [64]
output_dtype = "f32"
defines = { T = "f32" }
limits = { max_n = 99 }
planner_fact = "kept"
"""


def test_loads_and_derives_facts(tmp_path):
    k = write(tmp_path, GOOD)["k_f32"]
    assert k.workgroup_size == (64, 1, 1)
    assert [(b.binding, b.name, b.space, b.access) for b in k.bindings] == [
        (0, "params", "uniform", "read"), (1, "x", "storage", "read"), (2, "y", "storage", "read_write")]
    assert [(f.name, f.offset) for f in k.uniform.fields] == [("n", 0), ("f", 4)]
    assert k.uniform.size == 16
    # 16*4 f32 = 256 bytes, plus a vec4<f32> = 16 bytes
    assert k.workgroup_memory == 256 + 16
    assert k.limits["max_n"] == 99 and k.facts["planner_fact"] == "kept"
    assert "array<f32>" in k.source and "{{" not in k.source


@pytest.mark.parametrize("change, message", [
    (('file = "k.wgsl"', 'file = "nope.wgsl"'), "does not exist"),
    (('entry = "main"', 'entry = "other"'), "entry point 'other' not found"),
    (("workgroup_size = [64]", "workgroup_size = [0]"), "positive integers"),
    (('defines = { T = "f32" }', "defines = {}"), "placeholder {{T}} has no value"),
    (('output_dtype = "f32"', 'output_dtype = "f64"'), "output_dtype"),
    (('op = "test"', 'op = "test"\nfeatures = ["warp-drive"]'), "unknown feature"),
    (('op = "test"\n', ""), "missing key 'op'"),
    (("[variants.k_f32]", "[variants.k_f32"), "not valid TOML"),
    (("[variants.k_f32]", "[variant.k_f32]"), r"unknown top-level tables \['variant'\]"),
    (('op = "test"', 'op = "test"\nmatrix = "nope"'), "unknown matrix 'nope'"),
    (('op = "test"', 'op = "test"\nrows = ["f32"]'), "'rows' needs a matrix"),
    # the limit used to replace the define silently: the shader got 99 where the entry wrote 64
    (('defines = { T = "f32" }', 'defines = { T = "f32", MAX_N = "64" }'),
     "defines MAX_N='64' disagree with the limits / workgroup_size that set MAX_N='99'"),
    (('defines = { T = "f32" }', 'defines = { T = "f32", WORKGROUP_SIZE_X = "32" }'),
     "defines WORKGROUP_SIZE_X='32' disagree with the limits / workgroup_size that set WORKGROUP_SIZE_X='64'"),
    # a key of another TOML type raised Python's TypeError / AttributeError, or was taken apart into characters
    (("workgroup_size = [64]", "workgroup_size = 64"), "registry variant k_f32: workgroup_size = 64 must be an array"),
    (('op = "test"', 'op = "test"\nfeatures = "subgroup"'), "features = 'subgroup' must be an array"),
    (('defines = { T = "f32" }', 'defines = "T"'), "defines = 'T' must be a table"),
    (("limits = { max_n = 99 }", "limits = 99"), "limits = 99 must be a table"),
    (('file = "k.wgsl"', "file = 5"), "file = 5 must be a string"),
    (('output_dtype = "f32"', 'output_dtype = ["f32"]'), "output_dtype = .'f32'. must be a string"),
])
def test_errors(tmp_path, change, message):
    with pytest.raises(RegistryError, match=message.replace("{", r"\{").replace("(", r"\(")):
        write(tmp_path, GOOD.replace(*change))


def test_a_bool_define_is_wgsl_text(dev, tmp_path):
    """A TOML bool define became Python's `True`, which WGSL does not know: the kernel loaded and its first dispatch
    died in the shader compiler. Now it is `true` / `false`, and the pipeline runs: y = x * (FLAG ? 3 : 5)."""
    from wgraph.scheduler.dispatch import Dispatch
    from wgraph.kernels.uniforms import pack_uniforms

    shader = SHADER.replace("* {{T}}(params.f)", "* select(5.0, 3.0, FLAG)") + "const FLAG: bool = {{FLAG}};\n"
    for flag, want in ((True, 3.0), (False, 5.0)):
        k = write(tmp_path, GOOD.replace('T = "f32"', f'T = "f32", FLAG = {str(flag).lower()}'), shader)["k_f32"]
        assert f"const FLAG: bool = {str(flag).lower()};" in k.source
        x = dev.tensor(np.arange(4, dtype=np.float32))
        y = dev.empty((4,), "f32")
        dev.run([Dispatch(k, pack_uniforms(k.uniform, {"n": 4, "f": 1.0}), (x, y), (1, 1, 1))])
        np.testing.assert_array_equal(y.numpy(), np.arange(4) * want)
    with pytest.raises(RegistryError, match=r"registry variant k_f32: defines.N = \[1, 2\] is a list; a define is a "
                                            r"string, a number or a bool"):
        write(tmp_path, GOOD.replace('T = "f32"', 'T = "f32", N = [1, 2]'))


def test_binding_attributes_in_either_order(dev, tmp_path):
    """`@binding(2) @group(0) var ...` (WGSL takes attributes in any order) was no binding to the loader: y was left
    out of the kernel's bindings and its bind group layout. Read in either order, the kernel runs: y = x * f."""
    from wgraph.scheduler.dispatch import Dispatch
    from wgraph.kernels.uniforms import pack_uniforms

    shader = SHADER.replace("@group(0) @binding(2) var<storage, read_write>",
                            "@binding(2) @group(0)\nvar<storage, read_write>")
    k = write(tmp_path, GOOD, shader)["k_f32"]
    assert [(b.binding, b.name, b.access) for b in k.bindings] == [(0, "params", "read"), (1, "x", "read"),
                                                                   (2, "y", "read_write")]
    x, y = dev.tensor(np.arange(4, dtype=np.float32)), dev.empty((4,), "f32")
    dev.run([Dispatch(k, pack_uniforms(k.uniform, {"n": 4, "f": 2.5}), (x, y), (1, 1, 1))])
    np.testing.assert_array_equal(y.numpy(), np.arange(4) * 2.5)
    # a declaration still not read (another attribute between) is an error naming it, not a binding left out
    with pytest.raises(RegistryError, match=r"k_f32: binding declaration not understood: \['@group\(0\) @binding\(1\) "
                                            r"@internal var<storage, read> x"):
        write(tmp_path, GOOD, SHADER.replace("@binding(1) var", "@binding(1) @internal var"))


@pytest.mark.parametrize("attributes", ["@workgroup_size({{WORKGROUP_SIZE}}) @compute",
                                        "@compute @workgroup_size(max(TILE * 4u, 16u), 1)",
                                        "@workgroup_size(max(TILE, 64u))\n@compute"])
def test_entry_point_attributes_in_either_order_and_with_calls(tmp_path, attributes):
    """`@workgroup_size(64) @compute fn main` (either order is WGSL) was 'entry point not found; has []', and
    `@workgroup_size(max(TILE * 4u, 16u))` was cut at its first ')' and split at the comma inside max."""
    k = write(tmp_path, GOOD, SHADER.replace("@compute @workgroup_size({{WORKGROUP_SIZE}})", attributes))["k_f32"]
    assert k.entry == "main" and k.workgroup_size == (64, 1, 1)   # TILE is 16


def test_a_kernel_that_enables_f16_needs_the_feature(tmp_path):
    """A shader enabling f16 in a variant whose features lack shader-f16 loaded, so the planners (which refuse a
    kernel by its features) gave it to a device without f16, whose pipeline creation failed inside wgpu."""
    shader = "{{ENABLE}}\n" + SHADER
    assert write(tmp_path, GOOD.replace('T = "f32"', 'T = "f32", ENABLE = "// enable f16;"'), shader)["k_f32"]
    with pytest.raises(RegistryError, match=r"k_f32: k.wgsl enables f16 but the variant's features \[\] lack "
                                            r"'shader-f16'"):
        write(tmp_path, GOOD.replace('T = "f32"', 'T = "f16", ENABLE = "enable f16;"'), shader)
    k = write(tmp_path, GOOD.replace('T = "f32"', 'T = "f16", ENABLE = "enable f16;"')
              .replace('op = "test"', 'op = "test"\nfeatures = ["shader-f16"]'), shader)["k_f32"]
    assert k.features == ("shader-f16",)


def test_a_define_equal_to_a_limit_is_kept(tmp_path):
    k = write(tmp_path, GOOD.replace('defines = { T = "f32" }', 'defines = { T = "f32", MAX_N = "99" }'))["k_f32"]
    assert k.limits["max_n"] == 99


def test_const_declared_twice_with_different_values_is_no_answer(tmp_path):
    # STEP is 16 at module scope and 8 in a function (WGSL allows the shadow): Kernel.const said 8, the last one
    shader = SHADER + ("const STEP: u32 = 16u;\n"
                       "fn other() -> u32 { const STEP: u32 = 8u; const ONE = 1u; return STEP + ONE; }\n"
                       "fn third() -> u32 { const ONE = 1u; return ONE; }\n")
    k = write(tmp_path, GOOD, shader)["k_f32"]
    assert k.const("ONE") == 1  # twice with one value: still known
    with pytest.raises(PlanError, match="declares no integer const STEP \\(or declares it more than once"):
        k.const("STEP")


def test_workgroup_size_must_match_shader(tmp_path):
    shader = SHADER.replace("{{WORKGROUP_SIZE}}", "32")
    with pytest.raises(RegistryError, match=r"registry workgroup_size \(64, 1, 1\) but k.wgsl declares \(32, 1, 1\)"):
        write(tmp_path, GOOD, shader)


def test_include_and_missing_include(tmp_path):
    (tmp_path / "common.wgsl").write_text("fn twice(a: f32) -> f32 { return 2.0 * a; }\n")
    k = write(tmp_path, GOOD, "//!include common.wgsl\n" + SHADER)["k_f32"]
    assert "fn twice" in k.source
    with pytest.raises(RegistryError, match="included file missing.wgsl does not exist"):
        write(tmp_path, GOOD, "//!include missing.wgsl\n" + SHADER)


def test_overridable_constants_are_bool_flags(tmp_path):
    k = write(tmp_path, GOOD, "override FAST: bool;\n" + SHADER)["k_f32"]
    assert dict(k.overrides) == {"FAST": "bool"}
    with pytest.raises(RegistryError, match=r"registry variant k_f32: overridable constants must be bool flags; "
                                            r"\{'N': 'u32'\} are not"):
        write(tmp_path, GOOD, "override FAST: bool;\noverride N: u32;\n" + SHADER)


def test_package_registry_compiles_on_device(dev):
    """Every variant the package ships compiles into a pipeline where the device has its features (side by side:
    PipelineCache.warm); afterwards each is in the cache (a get creates nothing)."""
    kernels = []
    for k in registry().values():
        if set(k.features) <= dev.caps.features and k.workgroup_memory <= dev.caps.max_workgroup_storage:
            # its overridable flags (bools: the registry refuses other types) all on: every code path (every
            # combination would be 8 pipelines an attention kernel; the numeric tests run the ones ops make). On a
            # GPU all off too; a CPU adapter compiles slowly (~75 ms a kernel on lavapipe: the all-off half was
            # ~20 s of the suite's 3 minutes), and its numeric tests compile the all-off pipelines calls use. A
            # tuning candidate all on only (the A/B that times it compiles both on its GPU).
            values = (True,) if k.facts.get("candidate") or dev.caps.is_cpu else (False, True)
            kernels += [k.specialized(dict.fromkeys(k.overrides, v)) for v in values] if k.overrides else [k]
    before = dev.stats.pipelines_created
    made = dev.pipelines.warm(kernels)
    assert dev.stats.pipelines_created - before == made and len(kernels) >= 4
    for k in kernels:
        dev.pipelines.get(k)
    assert dev.stats.pipelines_created - before == made and dev.pipelines.warm(kernels) == 0


def test_warm_compiles_each_new_pipeline_once():
    """warm() compiles what is not in the cache, each (variant, constants) once however often it is listed, on
    threads or on one; ops then run on the pipelines it made (a command list of new kernels warms them first)."""
    ks = [registry()[name] for name in ("softmax_f32", "gelu_f32", "silu_f32")]
    fresh = wg.Device()
    before = fresh.stats.pipelines_created
    assert fresh.pipelines.warm(ks + ks, threads=2) == len(ks)
    assert fresh.stats.pipelines_created - before == len(ks) and fresh.pipelines.warm(ks) == 0
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    got = wg.ops.softmax(fresh.tensor(x)).numpy()
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-5)
    assert fresh.stats.pipelines_created - before == len(ks)   # softmax ran on warm()'s pipeline


def test_overridable_constants_specialize_a_kernel(dev):
    """A shader's `override` constants are the kernel's: each set of values is one Kernel record (one pipeline,
    compiled once), the registry's own needs them all, and a wrong name or type is refused by name."""
    k = registry()["gemv_r1_f32"]
    assert dict(k.overrides) == {"ALL_ROWS": "bool", "HAS_NORM": "bool"}
    on, off = (k.specialized({"HAS_NORM": True, "ALL_ROWS": True}),
               k.specialized({"HAS_NORM": 0, "ALL_ROWS": 1}))
    assert on is k.specialized({"ALL_ROWS": 1, "HAS_NORM": 1}) and off is not on and off.name == on.name == k.name
    assert dict(on.constants) == {"ALL_ROWS": True, "HAS_NORM": True}
    assert dict(off.constants) == {"ALL_ROWS": True, "HAS_NORM": False}
    before = dev.stats.pipelines_created
    assert dev.pipelines.get(on)[0] is not dev.pipelines.get(off)[0]
    assert dev.pipelines.get(on)[0] is dev.pipelines.get(k.specialized({"HAS_NORM": True, "ALL_ROWS": True}))[0]
    assert dev.stats.pipelines_created - before <= 2
    assert dev.pipelines.get(on)[1] is dev.pipelines.get(off)[1]  # one bind group layout: bind groups are shared
    with pytest.raises(PlanError, match=r"needs its overridable constants \['ALL_ROWS', 'HAS_NORM'\]"):
        dev.pipelines.get(k)
    with pytest.raises(PlanError, match=r"declares overridable constants \['ALL_ROWS', 'HAS_NORM'\]; "
                                        r"got \['ALL_ROWS', 'HAS_NROM'\]"):
        k.specialized({"HAS_NROM": True, "ALL_ROWS": True})
    with pytest.raises(PlanError, match="HAS_NORM is a bool, got 2"):
        k.specialized({"HAS_NORM": 2, "ALL_ROWS": True})
    with pytest.raises(PlanError, match="declares overridable constants \\[\\]"):
        registry()["scale_f32"].specialized({"HAS_NORM": True})


def test_parse_overrides_reads_declarations_without_comments():
    from wgraph.kernels.wgsl import parse_overrides

    text = "override A: bool;\n// override B: u32;\noverride  C : f32 ;\nconst D: u32 = 1u;"
    assert parse_overrides(text) == {"A": "bool", "C": "f32"}


def test_repeat_directive_unrolls_nested_blocks():
    from wgraph.kernels.wgsl import expand_repeats

    text = "const N: u32 = 2u;\n//!repeat a N\n//!repeat b N + 1u\nx[$a][${b}u] = $a$b;\n//!end\n//!end\ntail"
    lines = expand_repeats(text, "t").split("\n")
    assert lines[1:] == [f"x[{a}][{b}u] = {a}{b};" for a in range(2) for b in range(3)] + ["tail"]
    # $F and $FT are two variables (a name that is a prefix of another), each replaced alone
    text = "//!repeat F 2\n//!repeat FT 3\nv[$F][$FT] = ${F}u + ${FT}u;\n//!end\n//!end"
    assert expand_repeats(text, "t").split("\n") == [f"v[{f}][{t}] = {f}u + {t}u;" for f in range(2) for t in range(3)]


@pytest.mark.parametrize("text, message", [
    ("//!repeat a 2\nx\n", "without //!end"),
    ("x\n//!end\n", "//!end without //!repeat"),
    ("//!repeat a M\nx\n//!end\n", "is not a constant integer expression"),
    # a negative count was "not a constant integer expression", which it is
    ("const N: u32 = 4u;\n//!repeat a N - 8u\nx\n//!end\n", r"count 'N - 8u' is -4; a count is 1 or more"),
    # a count of 0 dropped the block's lines without a word (a tile divided down to nothing)
    ("const D: u32 = 4u;\n//!repeat a D / 8u\nx\n//!end\n", r"count 'D / 8u' is 0; a count is 1 or more"),
    # an inner block reusing the outer's variable wrote "b0 b0 b0 b1 b1 b1" (the outer's number) for b0 b1 b2
    ("//!repeat a 2\n//!repeat a 3\nb$a\n//!end\n//!end\n", "//!repeat a inside a //!repeat a block"),
    ("//!repeat a 2\n//!repeat b 2\n//!repeat a 2\nb$a\n//!end\n//!end\n//!end\n", "//!repeat a inside"),
])
def test_repeat_directive_errors(text, message):
    from wgraph.kernels.wgsl import expand_repeats

    with pytest.raises(RegistryError, match=message):
        expand_repeats(text, "t")


@pytest.mark.parametrize("line", [
    "//!include common.wgsl // helpers", "//!include common.wgsl other.wgsl", "//!inclde common.wgsl", "//!include",
    "//!repeat a", "//!end here",
])
def test_a_malformed_directive_is_refused(tmp_path, line):
    """A `//!` line that is no directive as written stayed a comment: `//!include common.wgsl // helpers` left the
    file out without a word (the kernel then failed in the shader compiler); `//!repeat a` (no count) was reported
    as an '//!end without //!repeat'."""
    from wgraph.kernels.wgsl import preprocess

    (tmp_path / "common.wgsl").write_text("fn twice(a: f32) -> f32 { return 2.0 * a; }\n")
    assert "fn twice" in preprocess("//!include common.wgsl\nx", {}, tmp_path, "t")
    with pytest.raises(RegistryError, match=rf"t: '{re.escape(line)}' is no directive; write `//!include FILE`"):
        preprocess(f"{line}\nx $a\n//!end\n" if "repeat" in line else f"//!repeat a 1\n{line}\n//!end\n"
                   if "end" in line else f"{line}\nx", {}, tmp_path, "t")


@pytest.mark.parametrize("expr, want", [
    ("max(A, 3u) * 4u", 40), ("min(A, B + 1u)", 8), ("max(max(2u, B), A / 5u)", 7), ("(A + B) % 3u", None),
    ("max(A)", None), ("A + C", None),
])
def test_eval_int_takes_max_and_min(expr, want):
    from wgraph.kernels.wgsl import eval_int

    assert eval_int(expr, {"A": 10, "B": 7}) == want


@pytest.mark.parametrize("expr, want", [
    # WGSL's integer division truncates toward zero (the spec's "e1 / e2"); Python's // floors: -7 / 2 read -4
    ("-7 / 2", -3), ("7 / -2i", -3), ("-7 / -2", 3), ("(0 - A) / 4", -2), ("A / 4u", 2),
    # a division by 0 raised Python's ZeroDivisionError out of the loader; it is no value, like any expression the
    # reader cannot take; `**` is no WGSL operator, and max / min take two arguments
    ("A / 0u", None), ("max(A, 2u / (B - 7u))", None), ("2 ** 3", None), ("max(1, 2, 3)", None),
])
def test_eval_int_divides_as_wgsl_does(expr, want):
    from wgraph.kernels.wgsl import eval_int, expand_repeats, parse_consts

    assert eval_int(expr, {"A": 10, "B": 7}) == want
    if want is None:
        assert parse_consts(f"const X: i32 = {expr};\nconst Y: u32 = 3u;") == {"Y": 3}
        with pytest.raises(RegistryError, match="is not a constant integer expression"):
            expand_repeats(f"//!repeat a {expr}\nx\n//!end", "t")


def test_workgroup_memory_counts_alias_types_and_max(tmp_path):
    # an alias of vec4<f32> is 16 bytes; array<T4, max(N, 3)> with N = 5 is 5 of them; red is max(N * 8, 16) f32s
    shader = SHADER.replace("var<workgroup> tile: array<f32, TILE * 4u>;\nvar<workgroup> acc: vec4<f32>;",
                            "alias T4 = vec4<f32>;\nconst N: u32 = 5u;\nvar<workgroup> tile: array<T4, max(N, 3u)>;\n"
                            "var<workgroup> red: array<f32, max(N * 8u, 16u)>;")
    assert "alias T4" in shader
    k = write(tmp_path, GOOD, shader)["k_f32"]
    assert k.workgroup_memory == 5 * 16 + 40 * 4


MATRIX = """
[matrix.dt.f32]
output_dtype = "f32"
defines = { T = "f32" }
vars = { dt = "f32", wide = "f32" }

[matrix.dt.f16]
features = ["shader-f16"]
output_dtype = "f16"
defines = { T = "f16" }
vars = { dt = "f16", wide = "f32" }
"""

MATRIX_VARIANT = """
[variants.m]
matrix = "dt"
op = "test"
file = "k.wgsl"
entry = "main"
workgroup_size = [64]
features = ["subgroup"]
limits = { max_n = 7 }
dtype = "{dt}"
partner = "m_{wide}"
per_row.f16 = { limits = { extra = 2 }, planner_fact = "f16 only", row_fact = "{dt} of {wide}" }

[variants."m_{row}_short"]
matrix = "dt"
rows = ["f16"]
op = "test"
file = "k.wgsl"
entry = "main"
workgroup_size = [64]
output_dtype = "u32"
"""


def test_matrix_expands_one_variant_per_row(tmp_path):
    """A matrix row gives defaults; the variant's keys override them, features join, tables merge, vars fill
    `{name}`, per_row overrides one row; `{row}` places the row in the name; rows= keeps some rows."""
    reg = write(tmp_path, MATRIX, SHADER, "k.wgsl", MATRIX_VARIANT)
    assert list(reg) == ["m_f32", "m_f16", "m_f16_short"]
    f32, f16, short = reg["m_f32"], reg["m_f16"], reg["m_f16_short"]
    assert (f32.output_dtype, f16.output_dtype, short.output_dtype) == ("f32", "f16", "u32")
    assert f32.features == ("subgroup",) and set(f16.features) == {"shader-f16", "subgroup"}
    assert "array<f32>" in f32.source and "array<f16>" in f16.source
    assert dict(f32.limits) == {"max_n": 7} and dict(f16.limits) == {"max_n": 7, "extra": 2}
    assert (f32.facts["dtype"], f16.facts["dtype"]) == ("f32", "f16")
    assert f32.facts["partner"] == f16.facts["partner"] == "m_f32"
    assert "planner_fact" not in f32.facts and f16.facts["planner_fact"] == "f16 only"
    assert f16.facts["row_fact"] == "f16 of f32"  # per_row strings fill vars too (they were left "{dt} of {wide}")
    assert not {"matrix", "rows", "per_row"} & set(f16.facts)


def test_matrix_vars_fill_a_tables_strings(dev, tmp_path):
    """A row's var in a define (defines = { T = "{dt}" }) reached the shader as the text `{dt}`: the registry loaded
    and the first dispatch failed in the shader compiler. Filled, each row's kernel reads its own dtype."""
    from wgraph.scheduler.dispatch import Dispatch
    from wgraph.kernels.uniforms import pack_uniforms

    variant = MATRIX_VARIANT.replace('workgroup_size = [64]\n', 'workgroup_size = [64]\n'
                                     'defines = { T = "{dt}", S = "{wide}" }\n')
    matrix = MATRIX.replace('defines = { T = "f32" }\n', "").replace('defines = { T = "f16" }\n', "")
    reg = write(tmp_path, matrix, SHADER.replace("{{T}}(params.f)", "{{T}}({{S}}(params.f) + 0.5)"), "k.wgsl", variant)
    assert "array<f32>" in reg["m_f32"].source and "array<f16>" in reg["m_f16"].source
    assert "f32(params.f)" in reg["m_f16"].source
    k = reg["m_f32"]
    if not set(k.features) <= dev.caps.features:
        pytest.skip(f"the device lacks {k.features}")
    x, y = dev.tensor(np.arange(4, dtype=np.float32)), dev.empty((4,), "f32")
    dev.run([Dispatch(k, pack_uniforms(k.uniform, {"n": 4, "f": 1.5}), (x, y), (1, 1, 1))])
    np.testing.assert_array_equal(y.numpy(), np.arange(4) * 2.0)


@pytest.mark.parametrize("change, message", [
    (('dtype = "{dt}"', 'dtype = "{nope}"'), r"names \{nope\}, which the row does not define"),
    (('per_row.f16', 'per_row.bf16'), "matrix 'dt' has no row 'bf16'"),
    # a string was joined with the row's features character by character ("unknown feature 's'"), rows = "f16" read
    # as rows 'f', '1', '6'
    (('features = ["subgroup"]', 'features = "subgroup"'), "variant m: features = 'subgroup' must be an array"),
    (('rows = ["f16"]', 'rows = "f16"'), "variant m_{row}_short: rows = 'f16' must be an array"),
    (('per_row.f16 = { limits = { extra = 2 },', 'per_row.f16 = { limits = 2,'),
     "variant m: per_row.f16: limits = 2 must be a table"),
])
def test_matrix_errors(tmp_path, change, message):
    with pytest.raises(RegistryError, match=message):
        write(tmp_path, MATRIX, SHADER, "k.wgsl", MATRIX_VARIANT.replace(*change))


# MATRIX and a third row: f32 and f16 share a var value (wide = "f32"), u32 does not
MATRIX_U32 = MATRIX + """
[matrix.dt.u32]
output_dtype = "u32"
defines = { T = "u32" }
vars = { dt = "u32", wide = "u32" }
"""

PER_VAR_VARIANT = """
[variants.v]
matrix = "dt"
op = "test"
file = "k.wgsl"
entry = "main"
workgroup_size = [64]
limits = { max_n = 7 }
per_var.wide.f32 = { limits = { extra = 1 }, note = "a float: {dt}" }
per_var.dt.f16 = { limits = { half = 1 } }
per_row.f16 = { limits = { extra = 2 } }
"""


def test_per_var_overrides_every_row_of_a_value_and_per_row_applies_after(tmp_path):
    reg = write(tmp_path, MATRIX_U32, SHADER, "k.wgsl", PER_VAR_VARIANT)
    assert list(reg) == ["v_f32", "v_f16", "v_u32"]
    assert dict(reg["v_f32"].limits) == {"max_n": 7, "extra": 1}
    assert dict(reg["v_f16"].limits) == {"max_n": 7, "extra": 2, "half": 1}   # per_row's extra over per_var's
    assert dict(reg["v_u32"].limits) == {"max_n": 7}
    assert (reg["v_f32"].facts["note"], reg["v_f16"].facts["note"]) == ("a float: f32", "a float: f16")
    assert "note" not in reg["v_u32"].facts and "per_var" not in reg["v_f32"].facts


@pytest.mark.parametrize("change, message", [
    (("per_var.wide.f32", "per_var.wides.f32"),
     r"per_var.wides: not a var of every row of the variant \(the vars all its rows define: \['dt', 'wide'\]\)"),
    # a misspelt value overrode no row, silently
    (("per_var.wide.f32", "per_var.wide.f64"),
     r"per_var.wide.f64: no row of the variant has wide = 'f64' \(its values: \['f32', 'u32'\]\)"),
    # a value no row of the variant's `rows` has
    (("limits = { max_n = 7 }",
      'limits = { max_n = 7 }\nrows = ["u32", "f16"]\nper_var.dt.f32 = { limits = { x = 1 } }'),
     r"per_var.dt.f32: no row of the variant has dt = 'f32' \(its values: \['f16', 'u32'\]\)"),
    (("per_var.dt.f16 = { limits = { half = 1 } }", "per_var.dt.f16 = 3"),
     r"per_var.dt.f16: per_var = 3 must be a table"),
    (("per_var.dt.f16 = { limits = { half = 1 } }", "per_var.dt = 3"), r"per_var.dt: per_var = 3 must be a table"),
    (("{ limits = { half = 1 } }", "{ limits = 1 }"), r"per_var.dt.f16: limits = 1 must be a table"),
    (('matrix = "dt"\n', ""), r"'per_var' needs a matrix"),
])
def test_per_var_errors(tmp_path, change, message):
    variant = PER_VAR_VARIANT.replace(*change)
    assert variant != PER_VAR_VARIANT
    with pytest.raises(RegistryError, match=message):
        write(tmp_path, MATRIX_U32, SHADER, "k.wgsl", variant)


def test_matrix_defined_twice_and_variant_defined_twice(tmp_path):
    with pytest.raises(RegistryError, match="matrix 'dt' is defined twice"):
        write(tmp_path, MATRIX, SHADER, "k.wgsl", MATRIX)
    with pytest.raises(RegistryError, match="variant k_f32 is defined twice"):
        write(tmp_path, GOOD, SHADER, "k.wgsl", GOOD)


def test_include_name_from_a_define(tmp_path):
    (tmp_path / "piece_a.wgsl").write_text("fn piece() -> f32 { return 1.0; }\n")
    toml = GOOD.replace('defines = { T = "f32" }', 'defines = { T = "f32", PIECE = "piece_a.wgsl" }')
    k = write(tmp_path, toml, "//!include {{PIECE}}\n" + SHADER)["k_f32"]
    assert "fn piece() -> f32 { return 1.0; }" in k.source
    with pytest.raises(RegistryError, match="included file ../piece_a.wgsl does not exist"):
        write(tmp_path, toml.replace("piece_a.wgsl", "../piece_a.wgsl"), "//!include {{PIECE}}\n" + SHADER)


def test_pipeline_cache_keys_on_the_kernels_code_not_only_its_name(dev, tmp_path):
    """Two kernels of one name from two registries (a define apart: y = 2x and y = 3x; an entry point apart) are two
    pipelines: the caches keyed on the name ran the first one's code for both (y = 2x where 3x was loaded)."""
    from wgraph.kernels.uniforms import pack_uniforms
    from wgraph.scheduler.dispatch import Dispatch

    shader = SHADER.replace("* {{T}}(params.f)", "* {{T}}(params.f) * {{MUL}}")
    shader += ("@compute @workgroup_size(64)\n"
               "fn neg(@builtin(global_invocation_id) gid: vec3<u32>) { y[gid.x] = -x[gid.x]; }\n")
    kernels = []
    for i, (mul, entry) in enumerate([("2.0", "main"), ("3.0", "main"), ("2.0", "neg")]):
        (tmp_path / str(i)).mkdir()
        toml = GOOD.replace('T = "f32"', f'T = "f32", MUL = "{mul}"').replace('entry = "main"', f'entry = "{entry}"')
        kernels.append(write(tmp_path / str(i), toml, shader)["k_f32"])
    x = dev.tensor(np.array([1.0, -2.5, 4.0, 0.5], np.float32))
    got = []
    for k in kernels:
        y = dev.empty((4,), "f32")
        dev.run([Dispatch(k, pack_uniforms(k.uniform, {"n": 4, "f": 1.0}), (x, y), (1, 1, 1))])
        got.append(y.numpy())
    np.testing.assert_array_equal(got[0], [2.0, -5.0, 8.0, 1.0])
    np.testing.assert_array_equal(got[1], [3.0, -7.5, 12.0, 1.5])
    np.testing.assert_array_equal(got[2], [-1.0, 2.5, -4.0, -0.5])
