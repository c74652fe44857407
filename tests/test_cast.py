"""cast: f16 <-> f32 against numpy's conversion (exact widening, round-to-nearest narrowing)."""

import numpy as np
import pytest

import wgraph as wg


def test_cast_both_ways(dev, rng):
    if not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    x = (rng.standard_normal(1000) * 100).astype(np.float32)
    x[:3] = [70000.0, -1e-8, 65519.0]  # beyond f16 (inf), a subnormal's neighbourhood, rounds down to 65504
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    y = wg.ops.cast(dev.tensor(x), "f16")
    assert y.dtype == "f16" and np.array_equal(y.numpy(), want)
    z = wg.ops.cast(y, "f32")
    assert z.dtype == "f32" and np.array_equal(z.numpy(), want.astype(np.float32))
    with pytest.raises(wg.DtypeError, match="already f32"):
        wg.ops.cast(z, "f32")
