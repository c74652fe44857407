"""TieredKVCache: rows move hot -> cold as the sequence grows (chunks larger than the ring included)."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.ops.tiered_cache import TieredKVCache

import kv_reference as R


@pytest.mark.parametrize("quant", [None, "int8", "int4"])
@pytest.mark.parametrize("paged", [False, True])
def test_growth_matches_reference(dev, rng, quant, paged):
    heads, dim, window, cap = 2, 16, 8, 48
    n = window + cap
    k = rng.standard_normal((n, heads, dim)).astype(np.float16)
    v = rng.standard_normal((n, heads, dim)).astype(np.float16)
    cache = TieredKVCache(dev, kv_heads=heads, head_dim=dim, hot_window=window, cold_capacity=cap, quant=quant,
                          page_size=4 if paged else 0, page_table=rng.permutation(cap // 4) if paged else None)
    p = 0
    for chunk in (3, 11, 1, 1, 20, 1, 19):  # 11 and 20 are larger than the ring: rows go straight to cold
        cache.append(dev.tensor(k[p:p + chunk]), dev.tensor(v[p:p + chunk]))
        p += chunk
        q = rng.standard_normal((2, 4, dim)).astype(np.float32)
        out = cache.attention(dev.tensor(q), causal=True).numpy().astype(np.float64)
        cold = p - min(p, window)
        kr, vr = k[:p].astype(np.float64), v[:p].astype(np.float64)
        if quant is not None:  # the cold rows were quantized from their f16 values (reference quantizer)
            kr[:cold] = R.dequantize(*R.quantize(kr[:cold], quant))
            vr[:cold] = R.dequantize(*R.quantize(vr[:cold], quant))
        want = R.attention(q, kr, vr, np.arange(p - 2, p), np.arange(p))
        # the GPU quantizer may pick the other code at an exact .5 tie (one step off for one value): slack 1e-3
        np.testing.assert_allclose(out, want, atol=2e-5 if quant is None else 1e-3, rtol=0)
    assert p == n and cache.length == n
    with pytest.raises(wg.LimitError, match=r"tiered cache full: 57 rows need 49 cold rows .*holds 48"):
        cache.append(dev.tensor(k[:1]), dev.tensor(v[:1]))


def test_cache_errors(dev):
    with pytest.raises(wg.ShapeError, match="cold_capacity 10 must be a multiple of page_size 4"):
        TieredKVCache(dev, kv_heads=1, head_dim=8, hot_window=4, cold_capacity=10, page_size=4)
    with pytest.raises(wg.ShapeError, match="head_dim 12 must be a multiple of 8 for int4"):
        TieredKVCache(dev, kv_heads=1, head_dim=12, hot_window=4, cold_capacity=8, quant="int4")
    c = TieredKVCache(dev, kv_heads=1, head_dim=8, hot_window=4, cold_capacity=8)
    with pytest.raises(wg.ShapeError, match=r"must be \[n, 1, 8\]"):
        z = dev.tensor(np.zeros((1, 2, 8), np.float16))
        c.append(z, z)
