"""softmax and layernorm over the last axis against float64 numpy (f32 and f16; -inf entries and rows;
wide rows; with and without bias), recorded and in a graph."""

import numpy as np
import pytest

import wgraph as wg
from kernel_support import skip_unless_f16

F32_ULP = 2.0**-23


def _softmax64(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("rows,dim", [(3, 7), (5, 300), (2, 4099)])
def test_softmax_f32(dev, rng, rows, dim):
    x = (rng.standard_normal((rows, dim)) * 5).astype(np.float32)
    x[0, : dim // 2] = -np.inf  # masked entries
    got = wg.ops.softmax(dev.tensor(x)).numpy().astype(np.float64)
    exact = _softmax64(x)
    # each probability: exp (a few ulp) and one division by a sum of `dim` terms reduced in a tree
    assert np.all(np.abs(got - exact) <= (8 + np.log2(dim)) * F32_ULP * exact + 1e-38)
    assert np.all(got[0, : dim // 2] == 0)


def test_softmax_rows_of_minus_inf_are_zeros_and_f16(dev, rng):
    x = rng.standard_normal((3, 40)).astype(np.float32)
    x[1] = -np.inf
    got = wg.ops.softmax(dev.tensor(x)).numpy()
    assert np.all(got[1] == 0) and not np.isnan(got).any()
    np.testing.assert_allclose(got[[0, 2]], _softmax64(x[[0, 2]]), rtol=1e-6, atol=1e-9)
    if dev.caps.has_f16:
        h = (rng.standard_normal((4, 50)) * 3).astype(np.float16)
        got16 = wg.ops.softmax(dev.tensor(h)).numpy()
        exact = _softmax64(h)
        assert got16.dtype == np.float16
        assert np.all(np.abs(got16 - exact) <= exact * 2.0**-10 + 2.0**-24)  # f32 math, one f16 rounding


def test_softmax_rows_with_nan_or_inf_are_nan(dev):
    """A row holding NaN or +inf is NaN throughout, as numpy's softmax (docs/ops.md); -inf entries stay 0 and
    the other rows are untouched."""
    x = np.array([[np.nan, 1, 2, 0], [np.inf, 1, 2, 0], [np.nan] * 4, [-np.inf, 1, np.nan, 0], [0.5, -np.inf, 2, 0],
                  [np.inf, np.inf, -np.inf, 3]], np.float32)
    with np.errstate(invalid="ignore"):
        e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
        want = e / e.sum(-1, keepdims=True)
    dtypes = (np.float32, np.float16) if dev.caps.has_f16 else (np.float32,)
    for dt in dtypes:
        got = wg.ops.softmax(dev.tensor(x.astype(dt))).numpy().astype(np.float64)
        assert np.isnan(got[[0, 1, 2, 3, 5]]).all(), (dt, got)
        np.testing.assert_allclose(got[4], want[4], rtol=1e-3 if dt == np.float16 else 1e-6)


def _layernorm64(x, w, b, eps):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * w
    return y + b if b is not None else y


@pytest.mark.parametrize("rows,dim,bias", [(4, 96, True), (3, 1000, False)])
def test_layernorm_f32(dev, rng, rows, dim, bias):
    x = (rng.standard_normal((rows, dim)) * 3 + 10).astype(np.float32)  # a large mean: the two-pass variance
    w = rng.standard_normal(dim).astype(np.float32)
    b = rng.standard_normal(dim).astype(np.float32) if bias else None
    got = wg.ops.layernorm(dev.tensor(x), dev.tensor(w), dev.tensor(b) if bias else None, eps=1e-5).numpy()
    exact = _layernorm64(x, w, b, 1e-5)
    # relative to the scale of the terms (|normalised x * w| + |b|), a few ulp per reduction level
    scale = np.abs(_layernorm64(x, w, None, 1e-5)) + (np.abs(b) if bias else 0) + np.abs(w)
    assert np.all(np.abs(got - exact) <= (16 + 2 * np.log2(dim)) * F32_ULP * scale)


def test_layernorm_f16_graph_and_errors(dev, rng):
    x = rng.standard_normal((2, 3, 64)).astype(np.float32)
    w = rng.standard_normal(64).astype(np.float32)
    g = wg.Graph("ln")
    g.output("y", wg.ops.layernorm(g.input("x", (2, 3, 64), "f32"), g.const("w", w), eps=1e-6))
    got = g.compile(dev).run(x=x)["y"].numpy()
    assert got.tobytes() == wg.ops.layernorm(dev.tensor(x), dev.tensor(w), eps=1e-6).numpy().tobytes()
    np.testing.assert_allclose(got, _layernorm64(x, w, None, 1e-6), rtol=1e-5, atol=1e-5)
    if dev.caps.has_f16:
        h, wh, bh = x.astype(np.float16), w.astype(np.float16), rng.standard_normal(64).astype(np.float16)
        got16 = wg.ops.layernorm(dev.tensor(h), dev.tensor(wh), dev.tensor(bh)).numpy()
        exact = _layernorm64(h, wh.astype(np.float64), bh.astype(np.float64), 1e-5)
        assert np.all(np.abs(got16 - exact) <= np.abs(exact) * 2.0**-10 + 2e-3)
    t = dev.tensor(x)
    with pytest.raises(wg.ShapeError, match=r"layernorm: bias must be \(64,\) for x \(2, 3, 64\), got \(3,\)"):
        wg.ops.layernorm(t, dev.tensor(w), dev.tensor(np.ones(3, np.float32)))
    with pytest.raises(wg.DtypeError, match="layernorm: weight dtype u32 differs from x's f32"):
        wg.ops.layernorm(t, dev.tensor(np.ones(64, np.uint32)))


def test_recorded_rows_equal_immediate(dev, rng):
    x = rng.standard_normal((3, 20)).astype(np.float32)
    w = rng.standard_normal(20).astype(np.float32)
    t, tw = dev.tensor(x), dev.tensor(w)
    before = dev.stats.snapshot()
    with dev.record():
        s = wg.ops.softmax(wg.ops.layernorm(t, tw))
        ids = wg.ops.sample(s, temperature=0.5, top_p=0.9, seed=4)
    assert dev.stats.since(before).submits == 1
    ref = wg.ops.softmax(wg.ops.layernorm(t, tw))
    assert s.numpy().tobytes() == ref.numpy().tobytes()
    assert ids.numpy().tobytes() == wg.ops.sample(ref, temperature=0.5, top_p=0.9, seed=4).numpy().tobytes()


def test_norm_eps_below_f32s_smallest_normal_is_refused(dev, rng):
    """eps goes into an f32 uniform: 1e-50 was accepted and became 0 there, so a row of zeros came out as NaN
    (0 * rsqrt(0)) from rmsnorm, add_rmsnorm and linear's norm, and every layernorm of one value; float64 gives 0
    (rmsnorm) and the bias (layernorm). eps is now refused below f32's smallest normal (a subnormal a GPU may flush
    to 0), and f32's smallest normal itself normalises a zero row to zeros."""
    x = np.zeros((2, 3), np.float32)
    w, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    tiny = float(np.finfo(np.float32).tiny)
    calls = {"rmsnorm": lambda eps: wg.ops.rmsnorm(dev.tensor(x), dev.tensor(w), eps=eps),
             "add_rmsnorm": lambda eps: wg.ops.add_rmsnorm(dev.tensor(x), dev.tensor(x), dev.tensor(w), eps=eps)[1],
             "layernorm": lambda eps: wg.ops.layernorm(dev.tensor(x), dev.tensor(w), dev.tensor(b), eps=eps),
             "linear": lambda eps: wg.ops.linear(dev.tensor(x), dev.tensor(np.eye(3, dtype=np.float32)),
                                                 norm=dev.tensor(w), eps=eps)}
    for op, call in calls.items():
        for eps in (1e-50, 1e-300, 1e-45, tiny / 2):
            with pytest.raises(wg.ArgumentError, match=rf"{op}: eps={eps!r} must be a finite real in "
                                                        r"\[1.1754944e-38, 3.4028235e\+38\]"):
                call(eps)
        got = call(tiny).numpy()
        assert np.array_equal(got, np.broadcast_to(b, x.shape) if op == "layernorm" else np.zeros_like(x)), (op, got)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_layernorm_rows_whose_sum_overflows_f32_are_not_nan(dev, dtype):
    """A finite row whose sum passes f32's range gave NaN (inf - inf): a row of f32's max (float64: the bias),
    [1e38, -1e38] x 4 (the tree's partial sums met as inf + -inf; documented: zeros, then the bias). Now the first
    is the bias, as float64, and the second the documented zeros; a row with an inf or NaN stays NaN. f16 rows
    of 65504 (sum 5.2e5, in range) are the bias too."""
    skip_unless_f16(dev, dtype)
    big = float(np.finfo(dtype).max)
    rows = np.array([[big] * 8, [-big] * 8, [big / 3, -big / 3] * 4, [1.0] * 7 + [np.inf], [1.0] * 7 + [np.nan]], dtype)
    w, b = np.ones(8, dtype), np.full(8, 0.5, dtype)
    got = wg.ops.layernorm(dev.tensor(rows), dev.tensor(w), dev.tensor(b), eps=1e-5).numpy()
    assert (got[:2] == 0.5).all(), got
    # f32: the squares of 1.1e38 pass f32's range (docs/ops.md: zeros); f16's 21835 squares stay in range: +-1
    expect = 0.5 if dtype == np.float32 else np.array([1.5, -0.5] * 4, dtype)
    assert (got[2] == expect).all(), got
    assert np.isnan(got[3:]).all(), got
