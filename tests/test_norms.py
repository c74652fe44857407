"""The normalisations' edge rules (docs/errors.md): a row whose f32 sum of squares overflows, and rows of no
values, for rmsnorm, add_rmsnorm, layernorm and linear's fused norm."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.errors import ShapeError

EPS = 1e-5


def _rms64(x, w):
    x = x.astype(np.float64)
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + EPS) * w


def test_a_row_whose_sum_of_squares_overflows_is_zeros_as_torch(dev, rng):
    """Row 0 holds values whose squares overflow f32 (3e19 ** 2 > 3.4e38): it normalises to zeros, as torch's f32
    rms_norm gives (1 / sqrt(inf) = 0), in every op that normalises; the other rows match float64."""
    d = 48
    x = rng.standard_normal((3, d)).astype(np.float32)
    x[0] = np.where(np.arange(d) % 2, 3e19, -3e19).astype(np.float32)   # mean 0: layernorm's variance overflows too
    w = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
    b = rng.standard_normal(d).astype(np.float32)
    X, W = dev.tensor(x), dev.tensor(w)
    with np.errstate(over="ignore"):   # the same f32 arithmetic in numpy: the torch-like answer for row 0
        assert not np.any(x[0] / np.sqrt(np.mean(x[0] * x[0]) + np.float32(EPS)))
    got = {"rmsnorm": wg.ops.rmsnorm(X, W, eps=EPS).numpy(),
           "add_rmsnorm": wg.ops.add_rmsnorm(X, dev.tensor(np.zeros_like(x)), W, eps=EPS)[1].numpy()}
    for name, y in got.items():
        assert not y[0].any(), name
        assert np.allclose(y[1:], _rms64(x[1:], w), rtol=1e-5, atol=1e-5), name
    y = wg.ops.layernorm(X, W, dev.tensor(b), eps=EPS).numpy()
    np.testing.assert_array_equal(y[0], b)
    x64 = x[1:].astype(np.float64)
    ref = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + EPS) * w + b
    assert np.allclose(y[1:], ref, rtol=1e-5, atol=1e-5)
    m = rng.standard_normal((5, d)).astype(np.float32)
    y = wg.ops.linear(X, dev.tensor(m), norm=W, eps=EPS).numpy()
    assert not y[0].any()
    assert np.allclose(y[1:], _rms64(x[1:], w) @ m.T.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("call", [
    lambda dev: wg.ops.rmsnorm(dev.tensor(np.ones((2, 0), np.float32)), dev.tensor(np.ones(0, np.float32))),
    lambda dev: wg.ops.add_rmsnorm(*(dev.tensor(np.ones((2, 0), np.float32)) for _ in range(2)),
                                   dev.tensor(np.ones(0, np.float32))),
    lambda dev: wg.ops.layernorm(dev.tensor(np.ones((2, 0), np.float32)), dev.tensor(np.ones(0, np.float32))),
    lambda dev: wg.ops.rmsnorm(dev.tensor(np.float32(2.0)), dev.tensor(np.ones(1, np.float32))),
], ids=["rmsnorm", "add_rmsnorm", "layernorm", "rmsnorm-0d"])
def test_every_norm_refuses_rows_of_no_values_naming_x(dev, call):
    """One rule for the three norms (layernorm alone refused D = 0 before), and a 0-d x is x's fault, not the
    weight's (the message was `weight must be (?,) for x ()`)."""
    before = dev.stats.snapshot()
    with pytest.raises(ShapeError, match=r": x must be \[\.\.\., dim\] with dim >= 1, got \((2, 0)?\)"):
        call(dev)
    assert dev.stats.since(before).dispatches == 0


def test_linear_norm_of_no_input_features_is_refused_and_plain_linear_is_its_bias(dev):
    x, w = dev.tensor(np.ones((1, 0), np.float32)), dev.tensor(np.ones((3, 0), np.float32))
    with pytest.raises(ShapeError, match=r"linear: norm= needs W's in_features >= 1 .*got W \(3, 0\)"):
        wg.ops.linear(x, w, norm=dev.tensor(np.ones(0, np.float32)))
    b = np.array([1.5, -2.0, 0.25], np.float32)
    np.testing.assert_array_equal(wg.ops.linear(x, w, dev.tensor(b)).numpy(), b[None])   # an empty sum is 0
