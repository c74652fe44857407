"""The GGUF reader: a file written by the `gguf` package's GGUFWriter reads back as the package's own reader and
dequantizer see it; hostile files (truncated, huge counts and lengths, unknown types, offsets past the end,
misaligned or overlapping data, duplicates) raise CheckpointError naming the field, never anything else."""

import struct

import gguf
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from wgraph.errors import ArgumentError, CheckpointError
from wgraph.models.gguf import GGUFFile

Q = gguf.GGMLQuantizationType


def test_writer_file_reads_back(tmp_path, rng):
    path = tmp_path / "good.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("t.u32", 7)
    w.add_int64("t.i64", -5)
    w.add_float32("t.f32", 0.25)
    w.add_float64("t.f64", 1e300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "ünï ✓")
    w.add_array("t.strs", ["a", "", "ç"])
    w.add_array("t.ints", [1, -2, 3])
    data = {"f32": (rng.standard_normal((3, 64)).astype(np.float32), Q.F32),
            "f16": (rng.standard_normal((2, 32)).astype(np.float32), Q.F16),
            "q8_0": (rng.standard_normal((5, 64)).astype(np.float32), Q.Q8_0),
            "q4_0": (rng.standard_normal((4, 96)).astype(np.float32), Q.Q4_0),
            "q4_1": (rng.standard_normal((3, 32)).astype(np.float32), Q.Q4_1),
            "q4_k": (_q4_k_blocks(rng, 2), Q.Q4_K),
            "vec": (rng.standard_normal(64).astype(np.float32), Q.F32)}
    for name, (a, qt) in data.items():
        if qt == Q.F32:
            w.add_tensor(name, a)
        elif qt == Q.F16:
            w.add_tensor(name, a.astype(np.float16))
        elif a.dtype == np.uint8:  # blocks made by hand (the package has no Q4_K quantizer)
            w.add_tensor(name, a, raw_dtype=qt)
        else:
            w.add_tensor(name, gguf.quants.quantize(a, qt), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    f = GGUFFile(path)
    assert f.version == 3 and f.alignment == 32
    m = f.metadata
    assert (m["t.u32"], m["t.i64"], m["t.f32"], m["t.f64"], m["t.bool"], m["t.str"]) == (7, -5, 0.25, 1e300, True,
                                                                                          "ünï ✓")
    assert m["t.strs"] == ["a", "", "ç"] and m["t.ints"].tolist() == [1, -2, 3]
    assert m["general.architecture"] == "llama" and f.value_types["t.strs"] == (9, 8)
    theirs = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    assert list(f.tensors) == list(data)
    for name, (a, qt) in data.items():
        t = f.tensors[name]
        assert t.shape == (a.shape if a.dtype != np.uint8 else (a.shape[0], a.shape[1] // 144 * 256)) and t.ggml_type == qt and t.type_name == qt.name
        assert np.array_equal(t.raw, np.asarray(theirs[name].data).view(np.uint8).reshape(-1)), name
        got = t.dequantized()
        assert got.dtype == np.float32 and got.shape == t.shape
        if qt == Q.F32:
            assert np.array_equal(got, a)
        elif qt == Q.F16:
            assert np.array_equal(got, a.astype(np.float16).astype(np.float32))
        elif a.dtype == np.uint8:
            assert np.array_equal(got, gguf.quants.dequantize(a, qt)) and np.isfinite(got).all()
        else:  # the package's own round trip, and within the block's quantization step of the data
            assert np.array_equal(got, gguf.quants.dequantize(gguf.quants.quantize(a, qt), qt)), name
            assert np.max(np.abs(got - a)) < (0.2 if qt == Q.Q8_0 else 0.7), name
    assert f.tensors["q4_1"].rows().shape == (3, 20)  # one Q4_1 block of 20 bytes per row of 32


def _q4_k_blocks(rng, rows: int) -> np.ndarray:
    """Random Q4_K rows of one 144-byte block (256 values): finite f16 scale and min, random 6-bit scales and nibbles."""
    blocks = rng.integers(0, 256, (rows, 144), dtype=np.uint8)
    blocks[:, :4] = np.array([0.01, 0.02], np.float16).view(np.uint8)
    return blocks


# ---- a hand-built file, so every field can be set to anything ----

def _str(s: bytes) -> bytes:
    return struct.pack("<Q", len(s)) + s


def build(*, kv=None, tensors=None, data=b"", version=3, n_tensors=None, n_kv=None, alignment=32, magic=b"GGUF"):
    """kv: [(key bytes, type, payload bytes)]; tensors: [(name bytes, dims, type, offset)]."""
    kv = [(b"general.architecture", 8, _str(b"llama"))] if kv is None else kv
    tensors = [(b"w", (32, 2), 0, 0)] if tensors is None else tensors
    data = bytes(256) if not data and tensors else data
    out = magic + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                              len(kv) if n_kv is None else n_kv)
    for key, vtype, payload in kv:
        out += _str(key) + struct.pack("<I", vtype) + payload
    for name, dims, ttype, offset in tensors:
        out += _str(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) \
            + struct.pack("<IQ", ttype, offset)
    out += bytes(-len(out) % alignment)
    return out + data


def _refused(tmp_path, raw: bytes, match: str):
    p = tmp_path / "bad.gguf"
    p.write_bytes(raw)
    with pytest.raises(CheckpointError, match=match):
        GGUFFile(p)


def test_hand_built_file_reads(tmp_path):
    p = tmp_path / "ok.gguf"
    words = [b"", b"a", "\u00e9t\u00e9".encode(), b"x" * 300, "\U0001F600".encode()]
    p.write_bytes(build(kv=[(b"general.architecture", 8, _str(b"llama")),
                            (b"words", 9, struct.pack("<IQ", 8, len(words)) + b"".join(map(_str, words)))]))
    f = GGUFFile(p)
    assert f.tensors["w"].shape == (2, 32) and f.tensors["w"].raw.nbytes == 256
    assert f.metadata["words"] == [w.decode() for w in words]   # a string array, element by element


BIG = 1 << 62


@pytest.mark.parametrize("kwargs,match", [
    ({"magic": b"GGML"}, "not a GGUF file"),
    ({"version": 1}, "version 1 is not supported"),
    ({"version": 3 << 24}, "big-endian"),
    ({"n_tensors": BIG}, "tensor_count=4611686018427387904 exceeds"),
    ({"n_kv": BIG}, "kv_count=4611686018427387904 exceeds"),
    ({"n_kv": 2, "tensors": [], "alignment": 1}, "key of metadata entry 1 length needs 8 bytes"),
    ({"kv": [(b"k", 8, struct.pack("<Q", BIG))]}, r"metadata 'k' length=4611686018427387904 exceeds"),
    ({"kv": [(b"k", 9, struct.pack("<IQ", 4, BIG))]}, r"metadata 'k' item count=4611686018427387904 exceeds"),
    ({"kv": [(b"k", 9, struct.pack("<IQ", 8, BIG))]}, r"metadata 'k' item count"),
    ({"kv": [(b"k", 9, struct.pack("<IQ", 8, 2) + _str(b"ok") + struct.pack("<Q", BIG))]},
     r"metadata 'k'\[1\] length=4611686018427387904 exceeds"),                    # a string array's element
    ({"kv": [(b"k", 9, struct.pack("<IQ", 8, 3) + _str(b"ok") + _str(b"\xff") + _str(b""))]},
     r"metadata 'k'\[1\] is not valid UTF-8"),
    ({"kv": [(b"k", 9, struct.pack("<IQ", 8, 2) + _str(b"ok") + struct.pack("<Q", 10**6))]},
     r"metadata 'k'\[1\] length=1000000 is more than the rest of the file can hold"),
    ({"kv": [(b"k", 9, struct.pack("<IQ", 9, 1))]}, "array of arrays"),
    ({"kv": [(b"k", 9, struct.pack("<IQ", 77, 1))]}, "unknown array item type 77"),
    ({"kv": [(b"k", 13, b"\0" * 8)]}, "'k' has unknown value type 13"),
    ({"kv": [(b"k", 7, b"\x02")]}, "bool of value 2"),
    ({"kv": [(b"\xff\xfe", 4, b"\0" * 4)]}, "key of metadata entry 0 is not valid UTF-8"),
    ({"kv": [(b"k", 4, b"\0" * 4), (b"k", 4, b"\0" * 4)]}, "metadata key 'k' appears twice"),
    ({"kv": [(b"general.alignment", 4, struct.pack("<I", 24))]}, "general.alignment=24 must be"),
    ({"kv": [(b"general.alignment", 5, struct.pack("<i", 32))]}, "must be a UINT32"),
    ({"tensors": [(b"w", (32, BIG), 0, 0)]}, r"tensor 'w' has dims"),
    ({"tensors": [(b"w", (0, 2), 0, 0)]}, r"tensor 'w' has dims \[0, 2\]"),
    ({"tensors": [(b"w", (), 0, 0)]}, "n_dims=0"),
    ({"tensors": [(b"w", (1, 1, 1, 1, 1), 0, 0)]}, "n_dims=5"),
    ({"tensors": [(b"w", (32, 2), 99, 0)]}, "tensor 'w' has unknown GGML type 99"),
    ({"tensors": [(b"w", (33, 2), 8, 0)]}, "not a multiple of the Q8_0 block of 32"),
    ({"tensors": [(b"w", (32, 2), 0, 1 << 40)]}, "lie past the end of the file"),
    ({"tensors": [(b"w", (32, 4), 0, 0)]}, "lie past the end of the file"),
    ({"tensors": [(b"w", (8, 1), 0, 8)]}, "offset 8 is not a multiple of the alignment 32"),
    ({"tensors": [(b"w", (8, 1), 0, 0), (b"w", (8, 1), 0, 32)]}, "tensor name 'w' appears twice"),
    ({"tensors": [(b"a", (16, 2), 0, 0), (b"b", (8, 1), 0, 96)]}, "'a' and 'b' overlap"),
    ({"tensors": [(b"x" * 65, (8, 1), 0, 0)]}, "name of tensor 0 length=65 exceeds the limit 64"),
])
def test_hostile_headers_name_the_field(tmp_path, kwargs, match):
    _refused(tmp_path, build(**kwargs), match)


def test_every_truncation_is_refused(tmp_path):
    raw = build(kv=[(b"general.architecture", 8, _str(b"llama")), (b"a", 9, struct.pack("<IQ", 8, 2) + _str(b"x")
                                                                    + _str(b"yz"))])
    p = tmp_path / "t.gguf"
    for n in range(len(raw)):
        p.write_bytes(raw[:n])
        with pytest.raises(CheckpointError):
            GGUFFile(p)


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1, max_size=6))
def test_corrupted_bytes_never_escape(tmp_path_factory, flips):
    raw = bytearray(build(kv=[(b"general.architecture", 8, _str(b"llama")), (b"n", 9, struct.pack("<IQ", 4, 3)
                                                                             + bytes(12))]))
    for pos, value in flips:
        raw[pos % len(raw)] = value
    p = tmp_path_factory.mktemp("fuzz") / "f.gguf"
    p.write_bytes(bytes(raw))
    try:
        f = GGUFFile(p)
    except CheckpointError:
        return
    for t in f.tensors.values():  # whatever parsed lies inside the file
        assert t.raw.nbytes <= p.stat().st_size


def test_a_path_that_is_not_one_is_named():
    with pytest.raises(ArgumentError, match=r"GGUFFile: path=3 must be a path"):
        GGUFFile(3)
