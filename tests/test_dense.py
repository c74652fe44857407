"""Dense ops against float64 numpy: linear (f32 and f16 weights, with and without bias), rmsnorm, rope,
reshape views. Bound: the kernel's error is at most 2x that of the same math done in f32 numpy, plus atol."""

import numpy as np
import pytest

import wgraph as wg


def _within(got, exact, same_math_f32, atol=1e-6, factor=2.0):
    ref_err = np.abs(same_math_f32.astype(np.float64) - exact)
    err = np.abs(got.astype(np.float64) - exact)
    assert np.all(err <= factor * ref_err + atol), float(np.max(err - factor * ref_err))


@pytest.mark.parametrize("m,n,k,bias", [(1, 24, 40, True), (5, 17, 33, False), (33, 48, 64, True)])
def test_linear_f32(dev, rng, m, n, k, bias):
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    got = wg.ops.linear(dev.tensor(x), dev.tensor(w), dev.tensor(b) if bias else None).numpy()
    exact = x.astype(np.float64) @ w.astype(np.float64).T + (b if bias else 0.0)
    f32 = x @ w.T + (b if bias else np.float32(0))
    assert got.shape == (m, n) and got.dtype == np.float32
    _within(got, exact, f32, atol=1e-5 * np.sqrt(k))


def test_linear_f16_weights_and_batch_dims(dev, rng):
    if not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    x = rng.standard_normal((2, 3, 40)).astype(np.float32)
    w = rng.standard_normal((20, 40)).astype(np.float16)
    b = rng.standard_normal(20).astype(np.float32)
    got = wg.ops.linear(dev.tensor(x), dev.tensor(w), dev.tensor(b)).numpy()
    exact = x.astype(np.float64) @ w.astype(np.float64).T + b   # the f16 weights are the exact operand
    f32 = x @ w.astype(np.float32).T + b
    assert got.shape == (2, 3, 20)
    _within(got, exact, f32, atol=1e-4)


def test_linear_errors(dev):
    x = dev.tensor(np.ones((2, 8), np.float32))
    with pytest.raises(wg.ShapeError, match=r"x has 8 input features .* W \(4, 6\) takes 6"):
        wg.ops.linear(x, dev.tensor(np.ones((4, 6), np.float32)))
    with pytest.raises(wg.ShapeError, match=r"bias must be \(4,\)"):
        wg.ops.linear(x, dev.tensor(np.ones((4, 8), np.float32)), dev.tensor(np.ones(3, np.float32)))
    with pytest.raises(wg.DtypeError, match="linear has no kernel for .*u32"):
        wg.ops.linear(x, dev.tensor(np.ones((4, 8), np.uint32)))


@pytest.mark.parametrize("rows,dim", [(1, 64), (7, 100), (3, 513)])
def test_rmsnorm_f32(dev, rng, rows, dim):
    x = (rng.standard_normal((rows, dim)) * 3).astype(np.float32)
    w = rng.standard_normal(dim).astype(np.float32)
    got = wg.ops.rmsnorm(dev.tensor(x), dev.tensor(w), eps=1e-5).numpy()
    x64 = x.astype(np.float64)
    exact = x64 / np.sqrt(np.mean(x64 * x64, -1, keepdims=True) + 1e-5) * w
    f32 = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + np.float32(1e-5)) * w
    _within(got, exact, f32, atol=2e-6)


def test_rmsnorm_f16(dev, rng):
    if not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    x = rng.standard_normal((4, 96)).astype(np.float16)
    w = rng.standard_normal(96).astype(np.float16)
    got = wg.ops.rmsnorm(dev.tensor(x), dev.tensor(w)).numpy()
    x64 = x.astype(np.float64)
    exact = x64 / np.sqrt(np.mean(x64 * x64, -1, keepdims=True) + 1e-6) * w
    # f32 math, one rounding to f16 at the end: within one f16 ulp (plus the reduction's f32 error)
    assert np.all(np.abs(got - exact) <= np.abs(exact) * 2.0**-10 + 1e-3)


def _rope_ref(x, cos, sin, pos):
    x = x.astype(np.float64)
    half = x.shape[-1] // 2
    c = cos[pos:pos + x.shape[0]].astype(np.float64)[:, None, :]
    s = sin[pos:pos + x.shape[0]].astype(np.float64)[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, b * c + a * s], -1)


def test_rope_static_and_gpu_position(dev, rng):
    cos, sin = wg.ops.rope_tables(32, 16)
    x = rng.standard_normal((5, 3, 16)).astype(np.float32)
    tc, ts, tx = dev.tensor(cos), dev.tensor(sin), dev.tensor(x)
    exact = _rope_ref(x, cos, sin, 4)
    got = wg.ops.rope(tx, tc, ts, pos=4).numpy()
    assert np.all(np.abs(got - exact) <= 4 * np.finfo(np.float32).eps * (np.abs(x).max() + 1))
    pos = dev.tensor(np.array([3], np.uint32))
    got_gpu = wg.ops.rope(tx, tc, ts, pos=pos, pos_offset=1).numpy()
    assert got_gpu.tobytes() == got.tobytes()
    dev.write(pos, np.array([30], np.uint32))  # rows at positions 31..35: past the 32-row table -> zeros
    beyond = wg.ops.rope(tx, tc, ts, pos=pos, pos_offset=1)
    # reported on the device error flag (docs/errors.md): the first row to report wins, which on a parallel
    # GPU may be any of the four out of range (positions 32..35)
    with pytest.raises(wg.GpuValueError, match=r"rope: the position of a row .* was 3[2-5]; it must be < 32"):
        dev.check_errors()
    beyond = beyond.numpy()
    np.testing.assert_allclose(beyond[0], _rope_ref(x[:1], cos, sin, 31)[0], atol=1e-5)
    assert np.all(beyond[1:] == 0)


def test_rope_errors(dev):
    cos, sin = wg.ops.rope_tables(8, 16)
    x = dev.tensor(np.ones((4, 2, 16), np.float32))
    with pytest.raises(wg.LimitError, match=r"positions 6..9 exceed the table's 8 rows"):
        wg.ops.rope(x, dev.tensor(cos), dev.tensor(sin), pos=6)
    with pytest.raises(wg.ShapeError, match=r"cos table must be \[max_pos, 8\]"):
        wg.ops.rope(x, dev.tensor(np.ones((8, 4), np.float32)), dev.tensor(sin))


def test_reshape_op_is_a_view(dev):
    x = dev.tensor(np.arange(24, dtype=np.float32))
    v = wg.ops.reshape(x, 2, -1, 3)
    assert v.shape == (2, 4, 3) and v.buffer is x.buffer
    with pytest.raises(wg.ShapeError, match=r"cannot reshape \(24,\)"):
        wg.ops.reshape(x, (5, -1))
