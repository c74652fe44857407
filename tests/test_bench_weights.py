"""The bench's seeded weights: the GPU fill (bench_fill.wgsl) equals the numpy formula element for element in
f32 and f16, over a whole tensor and a row range; the two-stamp timer gives one positive time per batch."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.bench import timing, weights

from kernel_support import skip_unless_f16


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_gpu_fill_equals_numpy(dev, dtype):
    skip_unless_f16(dev, dtype)
    t = dev.empty((6, 10), dtype)
    weights.fill(t, 123, 0.25)
    want = weights.rows(123, (6, 10), range(6), 0.25)
    assert np.array_equal(t.numpy().astype(np.float32), want)
    assert len(np.unique(want)) > 50 and np.all(np.abs(want) <= 0.25)
    # a range: rows 1 and 2 hold elements 0..19 of seed 5; the rest is left as it was
    u = dev.tensor(np.full((4, 10), 7, np.float16 if dtype == "f16" else np.float32))
    weights.fill(u, 5, 1.0, first=10, count=20)
    got = u.numpy().astype(np.float32)
    assert np.all(got[[0, 3]] == 7) and np.array_equal(got[1:3].ravel(), weights.values(5, np.arange(20), 1.0))


def test_fill_checks_its_range(dev):
    with pytest.raises(wg.ShapeError, match="4-byte word"):
        weights.fill(dev.empty((4, 10), "f16"), 1, 1.0, first=1, count=4)
    with pytest.raises(wg.ShapeError, match=r"fills elements \[30, 50\)"):
        weights.fill(dev.empty((4, 10), "f32"), 1, 1.0, first=30, count=20)


def test_two_stamp_timer(dev):
    if not dev.caps.has_timestamps:
        pytest.skip("no timestamp queries")
    x = dev.tensor(np.ones(1024, np.float32))
    y = dev.empty((1024,), "f32")
    got = timing.calls_us(dev, lambda: wg.ops.scale(x, 2.0, out=y), reps=5, batches=2)
    assert len(got) == 2 and all(t > 0 for t in got)
    assert np.all(y.numpy() == 2.0)


def test_timestamps_count_the_tick_period(dev, monkeypatch):
    """wgpu-native resolves raw ticks (a tick is ~52 ns on Intel): with a period of 1e6 ns a tick (1 ms), a scale of
    1024 elements reads at least 0.1 s a call in both timers (it takes far more than 100 ns); they read it as ns."""
    from wgraph.scheduler import profiling

    if not dev.caps.has_timestamps:
        pytest.skip("no timestamp queries")
    monkeypatch.setattr(profiling, "timestamp_period_ns", lambda gpu: 1e6, raising=False)
    x = dev.tensor(np.ones(1024, np.float32))
    y = dev.empty((1024,), "f32")
    for stamped in (False, True):
        (us,) = timing.calls_us(dev, lambda: wg.ops.scale(x, 2.0, out=y), reps=2, batches=1, stamped=stamped)
        assert us > 1e5, stamped
