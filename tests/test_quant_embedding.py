"""embedding on GGML-quantized tables: the rows ids pick, dequantized to f32 by the GPU, against the rows the
`gguf` package dequantizes; host ids checked before any GPU work, GPU ids out of range written as zeros and
reported; `ops.embedding` on a QuantizedWeight is embedding_q; in a graph fed by argmax."""

import gguf
import numpy as np
import pytest
from gguf.quants import dequantize as gguf_dequantize

import wgraph as wg
from wgraph.ggml_blocks import FORMATS, quantize


def gguf_rows(qw):
    return gguf_dequantize(qw.raw(), gguf.GGMLQuantizationType[qw.ggml_type])


@pytest.mark.parametrize("ggml_type", sorted(FORMATS))
def test_rows_match_gguf(dev, rng, ggml_type):
    k = 3 * FORMATS[ggml_type].block_weights  # 3 blocks: Q4_0's and Q8_0's start on a word and mid-word
    qw = quantize(rng.standard_normal((11, k)).astype(np.float32), ggml_type)
    table = qw.upload(dev)
    want = gguf_rows(qw)
    ids = np.array([3, 0, 10, 3, 7], np.int64)
    got = wg.ops.embedding(ids, table, dtype="f32").numpy()
    assert got.shape == (5, k) and got.dtype == np.float32
    # d * q (+ m) in f32, as gguf computes it: equal but for a contracted fma's last bit
    np.testing.assert_allclose(got, want[ids], rtol=2e-7, atol=0)
    gpu_ids = dev.tensor(np.array([[9, 1], [2, 2]], np.uint32))
    np.testing.assert_allclose(wg.ops.embedding_q(gpu_ids, table).numpy(), want[[[9, 1], [2, 2]]], rtol=2e-7, atol=0)


def test_ids_out_of_range(dev, rng):
    qw = quantize(rng.standard_normal((10, 64)).astype(np.float32), "Q4_1")
    table = qw.upload(dev)
    before = dev.stats.snapshot()
    with pytest.raises(wg.LimitError, match=r"embedding: id 10 at index 1 is outside the table's 10 rows"):
        wg.ops.embedding([2, 10], table)
    with pytest.raises(wg.DtypeError, match=r"a quantized table's rows are f32, got dtype='f16'"):
        wg.ops.embedding([2], table, dtype="f16")
    with pytest.raises(wg.DtypeError, match="ids must be u32, got f32"):
        wg.ops.embedding(dev.tensor(np.ones(2, np.float32)), table)
    delta = dev.stats.since(before)
    assert delta.submits == 0 and delta.dispatches == 0
    out = wg.ops.embedding(dev.tensor(np.array([4, 10, 9], np.uint32)), table)
    with pytest.raises(wg.GpuValueError, match=r"embedding: a token id read from the GPU was 10; it must be < 10"):
        dev.check_errors()
    got = out.numpy()
    np.testing.assert_allclose(got[[0, 2]], gguf_rows(qw)[[4, 9]], rtol=2e-7, atol=0)
    assert np.all(got[1] == 0)


def test_graph_gathers_the_row_argmax_picks(dev, rng):
    """ids from the GPU (argmax of logits) into a quantized gather in one program, as a decode step embeds."""
    qw = quantize(rng.standard_normal((16, 32)).astype(np.float32), "Q8_0")
    g = wg.Graph("qgather")
    logits = g.input("logits", (1, 16))
    table = qw.with_blocks(g.state("table", qw.blocks.shape, "u32", init=qw.blocks))
    g.output("row", wg.ops.embedding(wg.ops.argmax(logits), table))
    prog = g.compile(dev)
    lv = rng.standard_normal((1, 16)).astype(np.float32)
    got = prog.run(logits=lv)["row"].numpy()
    np.testing.assert_allclose(got, gguf_rows(qw)[[int(lv.argmax())]], rtol=2e-7, atol=0)


def test_errors_name_the_call_made_embedding_or_embedding_q(dev, rng):
    """A quantized gather's errors name the call the user made: embedding_q's own said "embedding:" (its work was
    embedding's), and an unuploaded or out-of-range call to embedding_q named a function it never called."""
    qw = quantize(rng.standard_normal((10, 32)).astype(np.float32), "Q8_0")
    table = qw.upload(dev)
    f32_ids = dev.tensor(np.ones(2, np.float32))
    for fn in ("embedding", "embedding_q"):
        call = getattr(wg.ops, fn)
        with pytest.raises(wg.LimitError, match=rf"^{fn}: id 10 at index 1 is outside the table's 10 rows"):
            call([2, 10], table)
        with pytest.raises(wg.DtypeError, match=rf"^{fn}: ids must be u32, got f32"):
            call(f32_ids, table)
        with pytest.raises(wg.DtypeError, match=rf"^{fn}: the Q8_0 weight's blocks are host data"):
            call([2], qw)


def test_prefix_of_a_tensor_without_rows_says_it_has_none(dev):
    """prefix(1) of a (0, 4) tensor said rows must be 'an integer in [1, 0]', a range nothing is in."""
    with pytest.raises(wg.ShapeError, match=r"^Tensor.prefix\(rows=1\): the tensor of shape \(0, 4\) has no rows"):
        dev.empty((0, 4), "f32").prefix(1)


@pytest.mark.parametrize("shape", [(0, 32), (4, 0)])
def test_quantize_of_an_empty_matrix_names_weights(shape):
    """quantize(weights of shape (0, 32)) said "shape=(0, 32) must be a tuple ...": quantize has no shape argument."""
    with pytest.raises(wg.ShapeError, match=rf"^quantize: weights must be \[out_features, in_features\] with both >= "
                                           rf"1, got shape \({shape[0]}, {shape[1]}\)$"):
        quantize(np.zeros(shape, np.float32), "Q8_0")
