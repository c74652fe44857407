"""linear on GGML-quantized weights (Q8_0, Q4_0, Q4_1, Q4_K): the GEMV reading the raw blocks against the
float64 product of the weights as the `gguf` package dequantizes them; block layouts against gguf's table;
QuantizedWeight's checks; the plan against the registry's data; a graph with block states."""

import gguf
import numpy as np
import pytest
from gguf.quants import dequantize as gguf_dequantize

import wgraph as wg
from wgraph.ggml_blocks import FORMATS, QuantizedWeight, quantize, quantize_q4_k, stack_rows
from wgraph.kernels.registry import kernels_for
from wgraph.ops.quantized import plan_linear_q

TYPES = ("Q8_0", "Q4_0", "Q4_1", "Q4_K")


def reference(x: np.ndarray, qw: QuantizedWeight, bias=None):
    """(x @ W.T + b in float64 with W as gguf dequantizes the blocks, the sum of |x| |W| for the tolerance)."""
    w = gguf_dequantize(qw.raw(), gguf.GGMLQuantizationType[qw.ggml_type]).astype(np.float64)
    y = x.astype(np.float64) @ w.T
    if bias is not None:
        y = y + bias
    return y, np.abs(x.astype(np.float64)) @ np.abs(w).T


def check(got, x, qw, bias=None):
    want, scale = reference(x, qw, bias)
    # f32 products summed in f32: a few ulps of the sum of magnitudes; one wrong weight of K is ~1/K of it
    np.testing.assert_array_less(np.abs(got - want), 2e-6 * scale + 1e-6)


def test_block_layouts_match_gguf():
    """Every format's size and type number as gguf has them; every quantized kernel's layout as FORMATS says."""
    for name, fmt in FORMATS.items():
        t = gguf.GGMLQuantizationType[name]
        assert int(t) == fmt.ggml_type
        assert gguf.constants.GGML_QUANT_SIZES[t] == (fmt.block_weights, fmt.block_bytes)
    kernels = kernels_for("linear_q") + kernels_for("embedding_q")
    assert {kv.facts["ggml_type"] for kv in kernels} == set(FORMATS)
    for kv in kernels:
        fmt = FORMATS[kv.facts["ggml_type"]]
        assert (kv.limits["block_weights"], kv.limits["block_bytes"]) == (fmt.block_weights, fmt.block_bytes), kv.name


@pytest.mark.parametrize("ggml_type", TYPES)
def test_gemv_odd_sizes_and_rows(dev, rng, ggml_type):
    """in_features of 1, 2, 3 and 7 blocks; out_features no multiple of a workgroup's features; 1, 2, 5, 8 rows
    (the GEMV) and 11 (two chunks of 8); with and without bias."""
    bw = FORMATS[ggml_type].block_weights
    for blocks, n, m in ((1, 13, 1), (2, 7, 2), (3, 9, 5), (7, 21, 8), (3, 5, 11), (1, 1, 3)):
        k = blocks * bw
        w = rng.standard_normal((n, k)).astype(np.float32)
        qw = quantize(w, ggml_type)
        x = rng.standard_normal((m, k)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32) if m % 2 else None
        got = wg.ops.linear(dev.tensor(x), qw.upload(dev), None if bias is None else dev.tensor(bias)).numpy()
        assert got.shape == (m, n)
        check(got, x, qw, bias)


def test_gemv_keeps_leading_dims_writes_out_and_takes_no_rows(dev, rng):
    qw = quantize(rng.standard_normal((6, 64)).astype(np.float32), "Q4_0")
    x = rng.standard_normal((2, 3, 64)).astype(np.float32)
    out = dev.empty((2, 3, 6), "f32")
    assert wg.ops.linear(dev.tensor(x), qw.upload(dev), out=out) is out
    check(out.numpy().reshape(6, 6), x.reshape(6, 64), qw)
    assert wg.ops.linear(dev.tensor(np.zeros((0, 64), np.float32)), qw.upload(dev)).numpy().shape == (0, 6)


def test_every_gemv_variant_forced(dev, rng):
    """Each shipped GEMV kernel (tuning candidates included) on one odd shape: 19 features, 2 blocks of Q4_K
    (16 of the 32-weight formats), as many rows as it holds plus one (two chunks)."""
    xs = {}
    for kv in kernels_for("linear_q"):
        t = kv.facts["ggml_type"]
        k = 512
        if t not in xs:
            xs[t] = quantize(rng.standard_normal((19, k)).astype(np.float32), t)
        qw = xs[t]
        m = kv.limits["max_rows"] + 1
        x = rng.standard_normal((m, k)).astype(np.float32)
        got = wg.ops.linear_q(dev.tensor(x), qw.upload(dev), variant=kv.name).numpy()
        check(got, x, qw)


def test_plan_follows_the_registry():
    """rows -> the first non-candidate variant of the format whose max_rows holds them, else chunks of the one
    with the most; candidates only when forced."""
    for t in TYPES:
        planned = [kv for kv in kernels_for("linear_q") if kv.facts["ggml_type"] == t and not kv.facts.get("candidate")]
        most = max(planned, key=lambda kv: kv.limits["max_rows"])
        for rows in (1, 2, 8, 9, 40):
            p = plan_linear_q(rows, 100, 2048, t)
            fits = [kv for kv in planned if rows <= kv.limits["max_rows"]]
            want = fits[0] if fits else most
            assert p.variant == want.name
            assert p.row_chunks == -(-rows // want.limits["max_rows"])
            assert ("chunks of" in p.reason) == (not fits)
        candidate = next(kv for kv in kernels_for("linear_q") if kv.facts["ggml_type"] == t and kv.facts.get("candidate"))
        assert plan_linear_q(1, 100, 2048, t, candidate.name).variant == candidate.name
    assert plan_linear_q(1, 8, 256, "Q4_0").reason.startswith("1 rows <= 1: Q4_0 GEMV")
    with pytest.raises(wg.PlanError, match="variant 'quant_gemv_r1_q4_0' is not a Q8_0 GEMV"):
        plan_linear_q(1, 8, 256, "Q8_0", "quant_gemv_r1_q4_0")


def test_bad_arguments_raise_before_gpu_work(dev, rng):
    qw = quantize(rng.standard_normal((4, 64)).astype(np.float32), "Q8_0")
    w = qw.upload(dev)
    before = dev.stats.snapshot()
    with pytest.raises(wg.ShapeError, match=r"x must be \[\.\.\., 64\] for a Q8_0 \[4, 64\] weight"):
        wg.ops.linear(dev.tensor(np.zeros((1, 32), np.float32)), w)
    with pytest.raises(wg.DtypeError, match="blocks are host data"):
        wg.ops.linear(dev.tensor(np.zeros((1, 64), np.float32)), qw)
    with pytest.raises(wg.ShapeError, match=r"bias must be \(4,\)"):
        wg.ops.linear(dev.tensor(np.zeros((1, 64), np.float32)), w, dev.tensor(np.zeros(3, np.float32)))
    with pytest.raises(wg.DtypeError, match="linear: w must be a QuantizedWeight, got Tensor"):
        wg.ops.linear_q(dev.tensor(np.zeros((1, 64), np.float32)), dev.tensor(np.zeros((4, 64), np.float32)))
    delta = dev.stats.since(before)
    assert delta.submits == 0 and delta.dispatches == 0


def test_quantized_weight_checks_sizes():
    raw = bytes(range(256)) * 3  # 768 bytes
    with pytest.raises(wg.ShapeError, match=r"a Q4_0 \[3, 64\] matrix is 108 bytes \(3 rows of 2 blocks of 18\), got 768"):
        QuantizedWeight.from_bytes("Q4_0", (3, 64), raw)
    with pytest.raises(wg.ShapeError, match="in_features 48 is not a multiple of Q4_0's block of 32 weights"):
        QuantizedWeight.from_bytes("Q4_0", (3, 48), raw[:81])
    with pytest.raises(wg.ShapeError, match="in_features 300 is not a multiple of Q4_K's block of 256 weights"):
        QuantizedWeight.from_bytes("Q4_K", (1, 300), raw)
    with pytest.raises(wg.UnsupportedError, match=r"'Q6_K' is not a block format wgraph computes on"):
        QuantizedWeight.from_bytes("Q6_K", (1, 256), raw)
    with pytest.raises(wg.ArgumentError, match=r"QuantizedWeight.from_bytes: shape=\(1.0, 32\) must be a tuple "
                                                 r"\(out_features, in_features\) of two integers >= 1"):
        QuantizedWeight.from_bytes("Q8_0", (1.0, 32), raw[:34])
    with pytest.raises(wg.DtypeError, match="raw blocks must be uint8, got int16"):
        QuantizedWeight.from_bytes("Q8_0", (1, 32), np.zeros(17, np.int16))
    with pytest.raises(wg.ShapeError, match=r"held as u32 \[12\]; blocks is u32 \[11\]"):
        QuantizedWeight("Q8_0", (1, 32), np.zeros(11, np.uint32))
    # 3 rows of 18-byte blocks: 54 bytes, 3 blocks starting mid-word; padded to 16 bytes with a word to spare
    qw = QuantizedWeight.from_bytes("Q4_0", (3, 32), raw[:54])
    assert qw.nbytes == 54 and qw.blocks.nbytes == 64
    assert qw.raw().tobytes() == raw[:54] and not qw.blocks.view(np.uint8)[54:].any()
    assert QuantizedWeight.from_bytes("Q4_K", (1, 256), raw[:144]).blocks.nbytes == 160


def test_stack_rows_concatenates_blocks(rng):
    a, b = (quantize(rng.standard_normal((n, 64)).astype(np.float32), "Q4_0") for n in (3, 2))
    s = stack_rows([a, b])
    assert s.shape == (5, 64)
    np.testing.assert_array_equal(s.dequantize(), np.concatenate([a.dequantize(), b.dequantize()]))
    with pytest.raises(wg.ShapeError, match="does not stack"):
        stack_rows([a, quantize(rng.standard_normal((2, 64)).astype(np.float32), "Q8_0")])


def test_q4_k_quantizer_round_trips_through_gguf(rng):
    """quantize_q4_k's blocks, decoded by gguf: each weight within half a step of its sub-block (plus the
    rounding of the 6-bit scale and min)."""
    a = (rng.standard_normal((4, 512)) * rng.uniform(0.01, 3, (4, 1))).astype(np.float32)
    a[0, :32] = 0.0  # an all-zero sub-block
    a[1, 32:64] = np.abs(a[1, 32:64]) + 1.0  # a positive one (its min is 0)
    raw = quantize_q4_k(a)
    back = gguf_dequantize(raw, gguf.GGMLQuantizationType.Q4_K)
    sub = a.reshape(-1, 8, 32).astype(np.float64)
    lo = np.minimum(sub.min(-1), 0)
    step = (sub.max(-1) - lo) / 15
    d = raw.reshape(-1, 144)[:, 0:2].copy().view(np.float16).astype(np.float64)
    dmin = raw.reshape(-1, 144)[:, 2:4].copy().view(np.float16).astype(np.float64)
    bound = step / 2 + 8 * d + dmin / 2 + 1e-6
    err = np.abs(back.reshape(-1, 8, 32) - sub).max(-1)
    assert np.all(err <= bound)
    assert np.all(back[0, :32] == 0)


def test_graph_with_block_states_compiles_explains_and_round_trips(dev, rng):
    """A graph whose weight is a u32 state of blocks: compiled, replayed with new x, explained, and its JSON
    rebuilt (the op's params are a plain record)."""
    qw = quantize(rng.standard_normal((10, 256)).astype(np.float32), "Q4_K")
    g = wg.Graph("qgemv")
    x = g.input("x", (1, 256))
    blocks = g.state("w", qw.blocks.shape, "u32", init=qw.blocks)
    g.output("y", wg.ops.linear(x, qw.with_blocks(blocks)))
    prog = g.compile(dev)
    for _ in range(2):
        xv = rng.standard_normal((1, 256)).astype(np.float32)
        check(prog.run(x=xv)["y"].numpy(), xv, qw)
    assert "Q4_K GEMV (blocks dequantized in registers)" in prog.explain()
    assert wg.Graph.from_json(g.to_json()).to_json() == g.to_json()
