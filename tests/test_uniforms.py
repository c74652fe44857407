"""Uniform packing: offsets by WGSL's layout rules, and a GPU round trip through every registry struct."""

import numpy as np
import pytest

from wgraph.errors import WgraphError
from wgraph.kernels import wgsl
from wgraph.scheduler.dispatch import Dispatch
from wgraph.kernels.registry import Kernel, registry
from wgraph.kernels.uniforms import UniformArena, UniformCache, pack_uniforms

MIXED = """
struct Mixed { a: u32, b: vec3<f32>, c: f32, d: vec2<f32>, e: vec4<u32>, f: i32 }
"""


def test_offsets_follow_wgsl_rules():
    # Offsets worked out by hand from the WGSL spec's alignment table: vec3 aligns to 16 and is 12 bytes,
    # vec2 aligns to 8, vec4 to 16; the struct aligns to 16, so its size rounds 68 up to 80.
    layout = wgsl.struct_layout("Mixed", wgsl.parse_structs(MIXED), {})
    assert [(f.name, f.offset, f.size) for f in layout.fields] == [
        ("a", 0, 4), ("b", 16, 12), ("c", 28, 4), ("d", 32, 8), ("e", 48, 16), ("f", 64, 4)]
    assert layout.size == 80


ATTRIBUTED = """
struct Attr { a: u32, @align(16) b: f32, @size(12) c: f32, d: vec2<f32>, @align(32) e: u32, f: f32 }
"""


def test_align_and_size_attributes_follow_wgsl_rules(dev, rng):
    """@align(n) and @size(n) on members were matched and dropped: the packer put b at 4, c at 8, d at 16, e at 24,
    f at 28, where the GPU reads 16, 20, 32, 64, 68. By hand from WGSL's structure member layout rules: a 0..4; b
    aligned to 16: 16; c 20 with size 12; d (align 8) 32; e aligned to 32: 64; f 68, the end 72; AlignOf 32, so
    the struct is 96 bytes (the uniform block and WGSL's SizeOf alike). The GPU reads back what was packed."""
    layout = wgsl.struct_layout("Attr", wgsl.parse_structs(ATTRIBUTED), {})
    assert [(f.name, f.offset, f.size) for f in layout.fields] == [
        ("a", 0, 4), ("b", 16, 4), ("c", 20, 12), ("d", 32, 8), ("e", 64, 4), ("f", 68, 4)]
    assert layout.size == 96
    assert wgsl.type_align_size("Attr", wgsl.parse_structs(ATTRIBUTED), {}) == (32, 96)
    _roundtrip(dev, "probe_attr", layout, ATTRIBUTED, rng)
    consts = {"W": 8}
    assert wgsl.struct_layout("C", wgsl.parse_structs("struct C { a: f32, @align(W * 2) b: f32 }"), consts).fields[1] \
        .offset == 16   # a constant expression
    for bad, message in (("@align(6) b: f32", r"@align\(6\) must be a power of 2"),
                         ("@align(4) b: vec2<f32>", r"@align\(4\) must be a power of 2 and a multiple of the type's "
                                                    r"alignment, 8"),
                         ("@size(2) b: f32", r"@size\(2\) is below the type's size, 4"),
                         ("@size(N) b: f32", r"@size\(N\) is not a constant integer expression")):
        with pytest.raises(wgsl.RegistryError, match=rf"struct B, member b: .*{message}"):
            wgsl.struct_layout("B", wgsl.parse_structs(f"struct B {{ a: u32, {bad} }}"), {})


WORKGROUP_STRUCTS = """
struct P { a: f32, b: f32 }
struct Q { v: vec3<f32>, w: f32 }
struct R { a: f32, v: vec3<f32> }
struct Three { a: f32, b: f32, c: f32 }
struct H { x: f16 }
"""


@pytest.mark.parametrize("decl, nbytes", [
    # by hand from WGSL's rules: SizeOf(S) is the end of its last member rounded up to AlignOf(S), an array's
    # stride SizeOf(E) rounded up to AlignOf(E); the 16-byte rounding of a uniform block is no part of either
    ("var<workgroup> xs: array<P, 64>;", 8 * 64),    # P: align 4, size 8 (was 16 a struct: 1024)
    ("var<workgroup> xs: array<Three, 10>;", 120),   # align 4, size 12 (was 160)
    ("var<workgroup> xs: array<H, 3>;", 6),          # align 2, size 2 (was 48)
    ("var<workgroup> one: P;", 8),
    ("var<workgroup> xs: array<Q, 4>;", 64),         # v 0..12, w 12..16: align 16, size 16
    ("var<workgroup> xs: array<R, 2>;", 64),         # a 0..4, v 16..28: align 16, size 32
    ("var<workgroup> xs: array<array<P, 3>, 2>;", 48),
], ids=["pair-f32", "three-f32", "f16", "one-struct", "vec3-first", "vec3-last", "nested-array"])
def test_workgroup_struct_arrays_count_wgsl_bytes(decl, nbytes):
    """The workgroup-memory count (Kernel.workgroup_memory, checked against the device's limit) took a struct's
    size as the uniform block's, rounded up to 16 bytes, so arrays of small structs counted up to 8x their bytes."""
    text = WORKGROUP_STRUCTS + decl
    assert wgsl.workgroup_bytes(text, wgsl.parse_structs(text), {}) == nbytes


def test_pack_errors():
    layout = wgsl.struct_layout("Mixed", wgsl.parse_structs(MIXED), {})
    ok = dict(a=1, b=(1, 2, 3), c=0.5, d=(1, 2), e=(1, 2, 3, 4), f=-1)
    assert len(pack_uniforms(layout, ok)) == 80
    with pytest.raises(WgraphError, match=r"unknown fields \['zz'\], missing fields \[\]"):
        pack_uniforms(layout, {**ok, "zz": 1})
    with pytest.raises(WgraphError, match=r"missing fields \['a'\]"):
        pack_uniforms(layout, {k: v for k, v in ok.items() if k != "a"})
    with pytest.raises(WgraphError, match="needs 3 values, got 2"):
        pack_uniforms(layout, {**ok, "b": (1, 2)})
    with pytest.raises(WgraphError, match="outside u32"):
        pack_uniforms(layout, {**ok, "a": -1})


def _probe_kernel(name: str, layout: wgsl.StructLayout, struct_src: str) -> Kernel:
    """A shader that writes the bits of every scalar of the struct, in field order, to `out`."""
    lines, i = [], 0
    for f in layout.fields:
        scalar, n = _components(f.type)
        for c in range(n):
            expr = f"params.{f.name}" + (f"[{c}]" if n > 1 else "")
            lines.append(f"out[{i}u] = bitcast<u32>({expr});")
            i += 1
    src = (f"{struct_src}\n@group(0) @binding(0) var<uniform> params: {layout.name};\n"
           "@group(0) @binding(1) var<storage, read_write> out: array<u32>;\n"
           "@compute @workgroup_size(1) fn main() {\n" + "\n".join(lines) + "\n}\n")
    bindings = wgsl.parse_bindings(src, name)
    return Kernel(name=name, op="probe", file="", entry="main", workgroup_size=(1, 1, 1), features=(),
                  output_dtype="u32", limits={}, facts={}, source=src, bindings=bindings, uniform=layout,
                  workgroup_memory=0), i


def _components(type_):
    if type_.startswith("vec"):
        inner = type_[5:-1] if "<" in type_ else {"f": "f32", "i": "i32", "u": "u32"}[type_[4]]
        return inner, int(type_[3])
    return type_, 1


def _random_values(layout, rng):
    values, expected = {}, []
    for f in layout.fields:
        scalar, n = _components(f.type)
        if scalar == "f32":
            v = rng.standard_normal(n).astype(np.float32)
            bits = v.view(np.uint32)
        elif scalar == "i32":
            v = rng.integers(-1000, 1000, n).astype(np.int32)
            bits = v.view(np.uint32)
        else:
            v = rng.integers(0, 2**32 - 1, n, dtype=np.uint64).astype(np.uint32)
            bits = v
        values[f.name] = v if n > 1 else v[0]
        expected.extend(int(b) for b in bits)
    return values, expected


def _roundtrip(dev, name, layout, struct_src, rng):
    kernel, count = _probe_kernel(name, layout, struct_src)
    out = dev.empty((count,), "u32")
    values, expected = _random_values(layout, rng)
    dev.run([Dispatch(kernel, pack_uniforms(layout, values), (out,), (1, 1, 1))])
    np.testing.assert_array_equal(out.numpy(), np.array(expected, np.uint32))


def test_gpu_reads_what_the_packer_wrote(dev, rng):
    structs = wgsl.parse_structs(MIXED)
    _roundtrip(dev, "probe_mixed", wgsl.struct_layout("Mixed", structs, {}), MIXED, rng)


def test_every_registry_struct_round_trips(dev, rng):
    """The packer and the GPU agree on every uniform struct the package ships."""
    seen = set()
    for k in registry().values():
        if k.uniform is None or k.uniform.name in seen or any(_components(f.type)[0] == "f16" for f in k.uniform.fields):
            continue
        seen.add(k.uniform.name)
        decl = "struct %s { %s }" % (k.uniform.name, ", ".join(f"{f.name}: {f.type}" for f in k.uniform.fields))
        _roundtrip(dev, f"probe_{k.uniform.name}", k.uniform, decl, rng)
    assert seen


def test_arena_aligns_and_dedupes():
    arena = UniformArena(256)
    assert arena.add(b"a" * 16) == 0
    assert arena.add(b"b" * 16) == 256
    assert arena.add(b"a" * 16) == 0
    assert len(arena) == 256 + 16


def test_uniform_cache_keys_on_full_bytes():
    made, released = [], []
    cache = UniformCache(lambda d: made.append(d) or object(), released.append, capacity=2)
    a, created = cache.get(b"x" * 16)
    assert created and cache.get(b"x" * 16) == (a, False)
    cache.get(b"y" * 16)
    cache.get(b"z" * 16)  # evicts x, the least recently used
    assert released == [a] and len(cache) == 2


@pytest.mark.parametrize("field, value, message", [
    # a bool or a string became 1 / 5 / NaN through int() and float(): the kernel read a number nobody gave
    ("a", True, r"Mixed.a is u32, got True \(bool\)"),
    ("a", np.bool_(True), r"Mixed.a is u32, got .*True.* \(bool"),
    ("a", "5", r"Mixed.a is u32, got '5' \(str\)"),
    ("c", "nan", r"Mixed.c is f32, got 'nan' \(str\)"),
    ("c", False, r"Mixed.c is f32, got False \(bool\)"),
    # NaN / inf in an f32 field was packed as such (0x7fc00000, 0x7f800000)
    ("c", float("nan"), r"Mixed.c is f32, got nan; it must be finite"),
    ("c", -np.inf, r"Mixed.c is f32, got -inf; it must be finite"),
    ("b", (1.0, np.float32("inf"), 2.0), r"Mixed.b is f32, got inf; it must be finite"),
    ("e", (True, False, True, True), r"Mixed.e is u32, got .*True"),
    # numpy made one array of a list's items: the bool among ints became 1, the string among numbers a str array
    ("e", (1, True, 2, 3), r"Mixed.e is u32, got True \(bool\)"),
    ("b", [0.5, True, 2.0], r"Mixed.b is f32, got True \(bool\)"),
])
def test_pack_refuses_values_that_are_not_finite_numbers(field, value, message):
    layout = wgsl.struct_layout("Mixed", wgsl.parse_structs(MIXED), {})
    ok = dict(a=1, b=(1, 2, 3), c=0.5, d=(1, 2), e=(1, 2, 3, 4), f=-1)
    with pytest.raises(WgraphError, match=message):
        pack_uniforms(layout, {**ok, field: value})


@pytest.mark.parametrize("field, value, message", [
    # float() of an int past every float raised a bare OverflowError (2**1100 in an f32 field, or in a vector's)
    ("c", 2**1100, r"Mixed\.c=1358298529\d+\.\.\. is outside f32's range"),
    ("c", -2**1100, r"Mixed\.c=-1358298529\d+\.\.\. is outside f32's range"),
    ("b", (1.0, 2**1100, 2.0), r"Mixed\.b=1358298529\d+\.\.\. is outside f32's range"),
    ("a", 2**1100, r"Mixed\.a=1358298529\d+\.\.\. is outside u32 \[0, 4294967295\]"),
    ("f", -2**1100, r"Mixed\.f=-1358298529\d+\.\.\. is outside i32 \[-2147483648, 2147483647\]"),
    ("c", None, r"Mixed\.c is f32, got None \(NoneType\)"),
    ("d", None, r"Mixed\.d is vec2<f32>: needs 2 values, got 1 \(None\)"),
], ids=["f32-2^1100", "f32-neg-2^1100", "vec3-2^1100", "u32-2^1100", "i32-neg-2^1100", "f32-None", "vec2-None"])
def test_pack_refuses_numbers_past_every_field_by_name(field, value, message):
    layout = wgsl.struct_layout("Mixed", wgsl.parse_structs(MIXED), {})
    ok = dict(a=1, b=(1, 2, 3), c=0.5, d=(1, 2), e=(1, 2, 3, 4), f=-1)
    with pytest.raises(WgraphError, match=message):
        pack_uniforms(layout, {**ok, field: value})


def test_pack_takes_numpy_scalars_and_whole_floats():
    layout = wgsl.struct_layout("Mixed", wgsl.parse_structs(MIXED), {})
    got = pack_uniforms(layout, dict(a=np.uint32(7), b=np.array([1, 2, 3], np.float32), c=np.float64(0.5),
                                     d=(1, 2), e=(1, 2.0, np.int64(3), 4), f=np.int32(-1)))
    # by hand: a at 0, b at 16..27, c at 28, d at 32, e at 48..63, f at 64; 80 bytes
    want = bytearray(80)
    want[0:4] = (7).to_bytes(4, "little")
    want[16:28] = np.array([1, 2, 3], "<f4").tobytes()
    want[28:32] = np.array([0.5], "<f4").tobytes()
    want[32:40] = np.array([1, 2], "<f4").tobytes()
    want[48:64] = np.array([1, 2, 3, 4], "<u4").tobytes()
    want[64:68] = b"\xff\xff\xff\xff"
    assert got == bytes(want)


NUMBERS = "struct Numbers { u: u32, i: i32, f: f32 }"


@pytest.mark.parametrize("u, i, f", [(2, -2, 2), (2**32 - 1, -(2**31), 2**24 + 1), (0, 2**31 - 1, 3**20)])
def test_pack_cache_serves_an_int_key_to_the_equal_float_with_the_packers_own_bytes(u, i, f):
    """ops.core._pack_cached keys on the values, where int 2 and float 2.0 are one key. That is safe because the
    packer gives them one byte string: a whole float is an integer field's int (pack_uniforms takes it, refusing
    only a fraction, which equals no int), and an int equal to a float is that float exactly in an f32 field. If
    the packer ever refused a whole float (or rounded an int otherwise), the cache would serve an int call's bytes
    for it: this fails first, and the key must then tell the types apart."""
    from wgraph.ops import core

    layout = wgsl.struct_layout("Numbers", wgsl.parse_structs(NUMBERS), {})
    ints, floats = {"u": u, "i": i, "f": f}, {"u": float(u), "i": float(i), "f": float(f)}
    assert ints == floats   # one cache key
    for first, second in ((ints, floats), (floats, ints)):
        core._PACKED.clear()
        assert core._pack_cached(layout, first) == pack_uniforms(layout, first)
        assert core._pack_cached(layout, second) == pack_uniforms(layout, second)
    with pytest.raises(WgraphError, match=r"Numbers.u is u32, got non-integer 2.5"):
        core._pack_cached(layout, {"u": 2.5, "i": 0, "f": 0.5})


BLOCK_COMMENTED = """
struct Commented { a: u32, /* was_b: u32, /* nested */ was_c: vec4<f32>, */ b: f32, // c: u32, /* opens nothing
  c: vec2<f32> }
"""


def test_block_comments_hide_members_consts_and_bindings(dev, rng):
    """WGSL's /* */ comments (which nest) were kept by the parser: their members took offsets, so the packer put b
    at 8 and c at 16 where the GPU reads b at 4, c at 8 (by hand: a 0..4, b 4..8, c aligned to 8: 8..16, 16 bytes).
    A const or a binding inside one was read as declared too."""
    layout = wgsl.struct_layout("Commented", wgsl.parse_structs(BLOCK_COMMENTED), {})
    assert [(f.name, f.offset) for f in layout.fields] == [("a", 0), ("b", 4), ("c", 8)]
    assert layout.size == 16
    _roundtrip(dev, "probe_commented", layout, BLOCK_COMMENTED, rng)
    text = "const T: u32 = 8u; /* const T: u32 = 4u; const U: u32 = 2u; */\n" \
           "/* @group(0) @binding(3) var<storage, read> z: array<f32>; */"
    assert wgsl.parse_consts(text) == {"T": 8}
    assert wgsl.parse_bindings(text, "t") == ()
    with pytest.raises(wgsl.RegistryError, match=r"block comment is never closed: '/\* a: u32"):
        wgsl.parse_structs("struct S { b: f32, /* a: u32 }")


@pytest.mark.parametrize("text, fields, size", [
    # the member's type was matched lazily up to the first comma: `array<f32` (then "no known WGSL layout")
    ("struct S { v: array<f32, 4>, m: f32 }", [("v", 0, 16), ("m", 16, 4)], 32),
    # by hand: a 2 x (3 f32s) array is 24 bytes at 0, a vec3 aligns to 16: 32..44, c 44..48
    ("struct S {\n  a: array<array<f32, 3>,\n 2>,\n  b: vec3<f32>,\n  c: f32,\n}",
     [("a", 0, 24), ("b", 32, 12), ("c", 44, 4)], 48),
    ("struct S { a: u32, e: array<vec4<u32>, 2>, f: f32 }", [("a", 0, 4), ("e", 16, 32), ("f", 48, 4)], 64),
    # an attribute's argument holding a call: @align(max(8, 16)) is 16
    ("struct S { a: f32, @align(max(8, 16)) b: f32 }", [("a", 0, 4), ("b", 16, 4)], 32),
], ids=["array-member", "nested-array-member", "array-of-vec4", "align-call"])
def test_struct_members_of_array_type_keep_their_commas(text, fields, size):
    layout = wgsl.struct_layout("S", wgsl.parse_structs(text), {})
    assert [(f.name, f.offset, f.size) for f in layout.fields] == fields
    assert layout.size == size
    # in workgroup memory, by WGSL's SizeOf: S { v: array<f32, 4>, m: f32 } aligns to 4 and is 20 bytes
    tile = "struct T { v: array<f32, 4>, m: f32 }\nvar<workgroup> tiles: array<T, 8>;"
    assert wgsl.workgroup_bytes(tile, wgsl.parse_structs(tile), {}) == 8 * 20
    with pytest.raises(WgraphError, match=r"uniform field type array<vec4<u32>,2> cannot be packed"):
        pack_uniforms(wgsl.struct_layout("S", wgsl.parse_structs(
            "struct S { a: u32, e: array<vec4<u32>, 2>, f: f32 }"), {}), {"a": 1, "e": [0] * 8, "f": 0.5})


@pytest.mark.parametrize("type_, align_size", [
    # WGSL's alignment and size table: matCxR<T> is C columns of vecR<T> (a vec3 column takes 16 bytes)
    ("mat4x4<f32>", (16, 64)), ("mat2x3f", (16, 32)), ("mat3x2<f32>", (8, 24)), ("mat2x2h", (4, 8)),
    ("mat4x3<f16>", (8, 32)), ("array<mat2x2<f32>, 3>", (8, 48)), ("bool", (4, 4)),
])
def test_matrix_and_bool_types_have_wgsl_layouts(type_, align_size):
    """A workgroup tile of a matrix type (or a bool flag in workgroup memory), both WGSL, failed the load with 'type
    has no known WGSL layout'."""
    assert wgsl.type_align_size(type_, {}, {}) == align_size
    text = f"var<workgroup> tile: {type_};\nvar<workgroup> n: u32;"
    assert wgsl.workgroup_bytes(text, {}, {}) == align_size[1] + 4
