"""Dtype arguments take wgraph's names and numpy's and torch's spellings of them (dtypes.dtype_name_of, used by
every dtype= of the public API); a dtype wgraph lacks is refused naming the spelling, wgraph's dtypes and what to
do instead. Python lists take dtype=; without one the message shows the call that says which."""

import re

import numpy as np
import pytest

import wgraph as wg
from wgraph.dtypes import BF16_BITS, dtype_name_of
from wgraph.models import Llama
from wgraph.models.config import LlamaConfig
from wgraph.models.pretrained import from_pretrained
from wgraph.models.random_checkpoint import tiny_config


class _TorchDtype:
    """Stands in for a torch dtype (torch is no dependency, and is read by name): its type is torch.dtype."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"

    __repr__ = __str__  # as torch's own: a test id, the same in every process


_TorchDtype.__module__, _TorchDtype.__name__ = "torch", "dtype"

# spelling -> the wgraph dtype it names (written out here, not read from wgraph's tables)
SPELLINGS = [
    ("f32", "f32"), ("f16", "f16"), ("bf16", "bf16"), ("i32", "i32"), ("u32", "u32"),
    ("float32", "f32"), ("float16", "f16"), ("int32", "i32"), ("uint32", "u32"), ("bfloat16", "bf16"),
    ("<f4", "f32"), ("f4", "f32"), ("half", "f16"), ("single", "f32"), ("<i4", "i32"), ("u4", "u32"),
    (np.float32, "f32"), (np.float16, "f16"), (np.int32, "i32"), (np.uint32, "u32"),
    (np.dtype("float32"), "f32"), (np.dtype("float16"), "f16"), (np.dtype("int32"), "i32"),
    (np.dtype("uint32"), "u32"), (BF16_BITS, "bf16"),
    (_TorchDtype("float32"), "f32"), (_TorchDtype("float16"), "f16"), (_TorchDtype("bfloat16"), "bf16"),
    (_TorchDtype("int32"), "i32"), (_TorchDtype("uint32"), "u32"),
]

# spelling -> what the refusal must say beyond the choices (None: only the choices)
REFUSED = [
    ("float64", r"float64: wgraph computes in f32: pass dtype='f32'"),
    (np.float64, r"float64: wgraph computes in f32"), (float, r"float64: wgraph computes in f32"),
    (np.dtype("float64"), r"float64: wgraph computes in f32"), ("f64", r"float64: wgraph computes in f32"),
    (_TorchDtype("float64"), r"float64: wgraph computes in f32"),
    ("int64", r"int64: wgraph's integers are i32 and u32"), (int, r"int64: wgraph's integers are i32 and u32"),
    ("int8", r"int8: 8-bit data is stored four to a u32: wgraph.dtypes.pack_bytes_u32"),
    (np.uint8, r"uint8: 8-bit data is stored four to a u32"), (_TorchDtype("int8"), r"int8: 8-bit data"),
    ("bool", r"bool: store flags as u32"), (">f4", None), ("3", None), ("float", r"float64"), ("F32", None),
    ("torch.float16", None), (1.7, None), (True, None), (np.ones(2, np.float32), None),
]
CHOICES = r"must be one of 'bf16', 'f16', 'f32', 'i32', 'u32'"


@pytest.mark.parametrize("spelling,want", SPELLINGS, ids=[repr(s) for s, _ in SPELLINGS])
def test_spelling_names_the_wgraph_dtype(spelling, want):
    assert dtype_name_of(spelling) == want


@pytest.mark.parametrize("spelling,instead", REFUSED, ids=[repr(s)[:30] for s, _ in REFUSED])
def test_a_dtype_wgraph_lacks_is_refused_naming_it(dev, spelling, instead):
    assert dtype_name_of(spelling) is None
    shown = repr(spelling)[:20]
    with pytest.raises(wg.DtypeError) as info:
        dev.empty((2,), spelling)
    message = str(info.value)
    assert message.startswith(f"dev.empty: dtype={shown}") and CHOICES in message, message
    if instead is not None:
        assert re.search(instead, message), message
    else:
        assert ";" not in message.split("'bfloat16')")[-1], message   # no advice for a non-dtype


def test_every_dtype_argument_takes_the_spellings(dev):
    """dev.tensor, dev.empty, Graph.input/state/const, embedding's and kv_dequantize's dtype=, and the models'."""
    data = np.array([1.5, -2.0, 3.25, 0.0])
    for spelling, want in [(np.float16, "f16"), ("float32", "f32"), (np.dtype("int32"), "i32"),
                           (_TorchDtype("bfloat16"), "bf16"), (_TorchDtype("uint32"), "u32")]:
        if want == "f16" and not dev.caps.has_f16:
            continue
        values = np.abs(np.trunc(data)) if want in ("i32", "u32") else data
        t = dev.tensor(values, dtype=spelling)
        assert t.dtype == want
        np.testing.assert_array_equal(t.numpy(), values)   # each value is exact in every one of these dtypes
        assert dev.empty((3,), spelling).dtype == want
        g = wg.Graph("spell")
        assert g.input("x", (2,), spelling).spec.dtype == want
        assert g.state("s", (4,), spelling, init=values.tolist()).spec.dtype == want   # a list takes the dtype
        assert g.const("c", values, spelling).spec.dtype == want
    table = dev.tensor(np.arange(8, dtype=np.float32).reshape(4, 2), dtype="bfloat16")
    rows = wg.ops.embedding([2, 0], table, dtype=np.float32)
    assert rows.dtype == "f32"
    np.testing.assert_array_equal(rows.numpy(), [[4, 5], [0, 1]])
    if not dev.caps.has_f16:
        return   # kv_quantize writes f16 scales (a quantized cache's): it needs shader-f16
    qkv = wg.ops.kv_quantize(dev.tensor(np.zeros((2, 1, 8), np.float32)), "int8")
    assert wg.ops.kv_dequantize(qkv, dtype=np.dtype("float32")).dtype == "f32"
    with pytest.raises(wg.DtypeError, match=r"kv_dequantize: dtype=<class 'numpy.int32'> must be one of 'f16', 'f32'"):
        wg.ops.kv_dequantize(qkv, dtype=np.int32)


def test_model_dtype_takes_the_spellings(dev):
    cfg = LlamaConfig.from_dict(tiny_config(num_hidden_layers=1, hidden_size=16, intermediate_size=32,
                                            num_attention_heads=2, num_key_value_heads=1, head_dim=8))
    with pytest.raises(wg.DtypeError, match=r"Llama.from_weights: dtype=<class 'numpy.float64'> must be one of "
                                            r"'f32', 'f16', 'bf16' .*float64: wgraph computes in f32"):
        Llama.from_weights(cfg, {}, dev, dtype=np.float64)
    # a spelling is accepted: the call goes on to the weights, and the missing one is what it names
    with pytest.raises(wg.CheckpointError, match=r"tensor 'model.embed_tokens.weight' is missing"):
        Llama.from_weights(cfg, {}, dev, dtype=np.float32)
    with pytest.raises(wg.DtypeError, match=r"from_pretrained: dtype='int32' must be one of 'f32', 'f16', 'bf16' "
                                            r"or None"):
        from_pretrained("/nonexistent", dev, dtype="int32")
    with pytest.raises(wg.CheckpointError, match=r"neither a checkpoint directory"):
        from_pretrained("/nonexistent", dev, dtype=_TorchDtype("float32"))


def test_python_lists_take_dtype_or_say_how(dev):
    np.testing.assert_array_equal(dev.tensor([1.0, 2.5], dtype="f32").numpy(), np.array([1.0, 2.5], np.float32))
    np.testing.assert_array_equal(dev.tensor([1, 2], dtype=np.int32).numpy(), np.array([1, 2], np.int32))
    assert dev.tensor([1.0, 2.5], dtype="float32").dtype == "f32"
    for data, dtype, numpy_dtype in (([1.0, 2.0], "f32", "float32"), ([1, 2], "i32", "int32"),
                                     ((3.5,), "f32", "float32"), (2.0, "f32", "float32")):
        with pytest.raises(wg.DtypeError) as info:
            dev.tensor(data)
        kind = type(data).__name__
        assert str(info.value) == (
            f"dev.tensor: a Python {kind} has no dtype of its own (numpy would make it "
            f"{'float64' if dtype == 'f32' else 'int64'}, which wgraph lacks); say which with dtype=, as in "
            f"dev.tensor(x, dtype='{dtype}'), or pass np.asarray(x, np.{numpy_dtype})")


def test_float64_arrays_are_still_refused_without_dtype(dev):
    """No silent narrowing: a float64 array needs dtype= (then it is converted) or astype."""
    with pytest.raises(wg.DtypeError, match=r"dev.tensor: got float64 data; wgraph stores f32, f16, bf16, u32 and i32 "
                                            r"and never narrows silently"):
        dev.tensor(np.ones(2))
    x = np.array([0.1, 1 / 3])
    np.testing.assert_array_equal(dev.tensor(x, dtype=np.float32).numpy(), x.astype(np.float32))


def test_rope_tables_take_numpy_and_torch_float_dtypes():
    """rope_tables makes host tables, so numpy's float64 is a dtype it takes; torch's dtypes by name too."""
    want = np.cos(np.arange(4)[:, None] * 10000.0 ** (-np.arange(0, 4, 2) / 4.0))
    for spelling, numpy_dtype in ((_TorchDtype("float64"), np.float64), ("float16", np.float16), (np.float32, np.float32)):
        cos, _ = wg.ops.rope_tables(4, 4, dtype=spelling)
        assert cos.dtype == numpy_dtype
        np.testing.assert_array_equal(cos, want.astype(numpy_dtype))
    for bad in (_TorchDtype("bfloat16"), "int32", None):
        with pytest.raises(wg.ArgumentError, match=r"rope_tables: dtype=.* must be a numpy float dtype"):
            wg.ops.rope_tables(4, 4, dtype=bad)


def test_rope_tables_take_wgraph_names():
    """rope_tables(dtype="f16") gave numpy's "f16", a 16-byte float128 table, and "f32" was refused, where every
    dtype= of wgraph takes wgraph's names (docs/ops.md). A wgraph name means the same here; "bf16" (bit patterns,
    not a float dtype) and the integers are refused."""
    for spelling, numpy_dtype in (("f16", np.float16), ("f32", np.float32), ("f64", np.float64)):
        cos, sin = wg.ops.rope_tables(4, 4, dtype=spelling)
        assert cos.dtype == sin.dtype == numpy_dtype, spelling
    for bad in ("bf16", "u32", "i32", "u8"):
        with pytest.raises(wg.ArgumentError, match=r"rope_tables: dtype=.* must be a numpy float dtype"):
            wg.ops.rope_tables(4, 4, dtype=bad)


def test_pack_bytes_u32_packs_little_endian_and_names_a_0d_array():
    """pack_bytes_u32(np.int8(5)) raised a bare IndexError ('tuple index out of range'); a ShapeError says why now.
    The packing itself: element 4k in the low byte of word k, the last axis padded with zeros."""
    from wgraph.dtypes import pack_bytes_u32
    got = pack_bytes_u32(np.array([[1, 2, 3, 4, 5], [-1, 0, 0, 0, 0]], np.int8))
    np.testing.assert_array_equal(got, np.array([[0x04030201, 0x00000005], [0x000000FF, 0]], np.uint32))
    with pytest.raises(wg.ShapeError, match=r"pack_bytes_u32 packs along the last axis; got a 0-d array \(5\)"):
        pack_bytes_u32(np.int8(5))
