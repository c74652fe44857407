"""add_rmsnorm: the residual sum and its RMSNorm in one dispatch, against float64 numpy; in a graph too."""

import numpy as np
import pytest

import wgraph as wg


def _ref(x, r, w, eps):
    s = x.astype(np.float64) + r
    return s, s / np.sqrt(np.mean(s * s, -1, keepdims=True) + eps) * w


@pytest.mark.parametrize("dtype,tol", [("f32", 1e-5), ("f16", 2e-3)])
def test_add_rmsnorm_matches_numpy(dev, rng, dtype, tol):
    if dtype == "f16" and not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    npt = np.float16 if dtype == "f16" else np.float32
    x, r = (rng.standard_normal((5, 200)).astype(npt) for _ in range(2))
    w = (1 + 0.1 * rng.standard_normal(200)).astype(npt)
    before = dev.stats.snapshot()
    s, y = wg.ops.add_rmsnorm(dev.tensor(x), dev.tensor(r), dev.tensor(w), eps=1e-5)
    dev.flush()
    assert dev.stats.since(before).dispatches == 1
    want_s, want_y = _ref(x, r.astype(np.float64), w.astype(np.float64), 1e-5)
    assert np.allclose(s.numpy(), want_s, rtol=tol, atol=tol)
    assert np.allclose(y.numpy(), want_y, rtol=tol, atol=tol)


def test_add_rmsnorm_in_a_graph_and_errors(dev, rng):
    x, r = (rng.standard_normal((2, 64)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal(64).astype(np.float32)
    g = wg.Graph("res")
    gs, gy = wg.ops.add_rmsnorm(g.input("x", (2, 64)), g.input("r", (2, 64)), g.const("w", w), eps=1e-6)
    g.output("s", gs)
    g.output("y", gy)
    out = g.compile(dev).run(x=x, r=r)
    want_s, want_y = _ref(x, r.astype(np.float64), w.astype(np.float64), 1e-6)
    assert np.allclose(out["s"].numpy(), want_s, rtol=1e-5, atol=1e-6)
    assert np.allclose(out["y"].numpy(), want_y, rtol=1e-5, atol=1e-5)
    with pytest.raises(wg.ShapeError, match=r"residual \(2, 63\)"):
        wg.ops.add_rmsnorm(dev.tensor(x), dev.tensor(r[:, :63]), dev.tensor(w))
    with pytest.raises(wg.DtypeError, match="share a dtype"):
        other = "f16" if dev.caps.has_f16 else "bf16"   # a float dtype other than f32 that the device has
        wg.ops.add_rmsnorm(dev.tensor(x), dev.tensor(r), dev.tensor(w, other))


@pytest.mark.parametrize("op", ["rmsnorm", "add_rmsnorm"])
def test_long_rows_match_float64_or_are_refused_on_a_cpu_adapter(dev, rng, op):
    """64 threads a row: on lavapipe (65,535 loop iterations an invocation) a row of 2,097,152 values lost its last
    576 (zeros) and one of 4,194,304 came out 5.66x too large; rows up to the cap match float64 to f32 summation's
    error with values spanning 1e-6..1e6 (measured 2e-7 relative at 100,000, 1.9e-6 at 1<<20)."""
    def run(x, w):
        if op == "rmsnorm":
            return wg.ops.rmsnorm(dev.tensor(x), dev.tensor(w)).numpy()
        return wg.ops.add_rmsnorm(dev.tensor(x), dev.tensor(np.zeros_like(x)), dev.tensor(w))[1].numpy()

    d = 100_000
    x = (rng.standard_normal((2, d)) * 10.0 ** rng.integers(-6, 7, (2, d))).astype(np.float32)
    w = rng.standard_normal(d).astype(np.float32)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt(np.mean(x64 * x64, -1, keepdims=True) + 1e-6) * w
    assert np.allclose(run(x, w), want, rtol=2e-6, atol=0)
    if not dev.caps.is_cpu:
        return
    d = 1 << 21
    x, w = np.ones((1, d), np.float32), np.ones(d, np.float32)
    with pytest.raises(wg.errors.LimitError, match=f"{op}: a row of {d} values"):
        run(x, w)
    d = 2_096_832  # the longest row 64 threads take under the cap: 2 * (32763 + 1) + 7 + 1 iterations
    assert np.allclose(run(np.ones((1, d), np.float32), np.ones(d, np.float32)), 1.0, rtol=1e-5)
