"""TieredKVCache: rows move hot -> cold as the sequence grows (chunks larger than the ring included)."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.ops.tiered_cache import TieredKVCache

import kv_reference as R
from kernel_support import TIERED_HOT, skip_unless_f16


@pytest.mark.parametrize("quant", [None, "int8", "int4"])
@pytest.mark.parametrize("paged", [False, True])
def test_growth_matches_reference(dev, rng, quant, paged):
    skip_unless_f16(dev, why=TIERED_HOT)
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
        if quant is not None:  # the cold rows as the GPU quantized them, each checked against the reference
            kr[:cold] = _checked_cold_rows(cache, cache.cold_k, cache.cold_k_scale, kr[:cold], quant)
            vr[:cold] = _checked_cold_rows(cache, cache.cold_v, cache.cold_v_scale, vr[:cold], quant)
        want = R.attention(q, kr, vr, np.arange(p - 2, p), np.arange(p))
        np.testing.assert_allclose(out, want, atol=2e-5, rtol=0)
    assert p == n and cache.length == n
    with pytest.raises(wg.LimitError, match=r"TieredKVCache.append: the cache is full: 57 rows need 49 cold rows .*holds 48"):
        cache.append(dev.tensor(k[:1]), dev.tensor(v[:1]))


def _checked_cold_rows(cache, packed, scales, x, quant):
    """The dequantized values of the first len(x) cold rows as stored on the GPU, after checking them against
    the reference quantizer: each scale is the reference's (max |x| / QMAX rounded up to f16) or one f16 step
    from it, and each code is rint(x / scale) for the GPU's scale, or one step off where x / scale is within
    1e-5 of a .5 tie (a GPU's division may round the other way: WGSL allows it 2.5 ULP)."""
    n = len(x)
    if n == 0:
        return x
    rows = np.arange(n)
    if cache.page_table is not None:  # logical cold row -> physical row through the page table
        table = cache.page_table.numpy().astype(np.int64)
        rows = table[rows // cache.page_size] * cache.page_size + rows % cache.page_size
    codes = R.unpack(packed.numpy()[rows], quant)
    s = scales.numpy()[rows]
    want_codes, want_s = R.quantize(x, quant)
    steps = np.abs(s.astype(np.float64) - want_s.astype(np.float64)) / np.spacing(want_s).astype(np.float64)
    assert np.all(steps <= 1), (s, want_s)
    ratio = x / np.where(s > 0, s, 1).astype(np.float64)[..., None]
    expect = np.clip(np.where(s[..., None] > 0, np.rint(ratio), 0), -R.QMAX[quant], R.QMAX[quant])
    off = codes != expect
    assert np.all(np.abs(codes - expect) <= 1), np.abs(codes - expect).max()
    assert np.all(np.abs(np.abs(ratio[off] - np.trunc(ratio[off])) - 0.5) < 1e-5), ratio[off]
    return R.dequantize(codes, s)


def test_cache_errors(dev):
    skip_unless_f16(dev, why=TIERED_HOT)   # the cache makes its hot ring before its checks
    with pytest.raises(wg.ShapeError, match="^TieredKVCache: cold_capacity 10 must be a positive multiple of page"):
        TieredKVCache(dev, kv_heads=1, head_dim=8, hot_window=4, cold_capacity=10, page_size=4)
    # 0 is a multiple of 4: the message said it was not
    with pytest.raises(wg.ShapeError, match="^TieredKVCache: cold_capacity 0 must be a positive multiple"):
        TieredKVCache(dev, kv_heads=1, head_dim=8, hot_window=4, cold_capacity=0, page_size=4)
    with pytest.raises(wg.ShapeError, match="^TieredKVCache: head_dim 12 must be a multiple of 8 for int4"):
        TieredKVCache(dev, kv_heads=1, head_dim=12, hot_window=4, cold_capacity=8, quant="int4")
    c = TieredKVCache(dev, kv_heads=1, head_dim=8, hot_window=4, cold_capacity=8)
    with pytest.raises(wg.ShapeError, match=r"^TieredKVCache.append: new rows .* must be \[n, 1, 8\]"):
        z = dev.tensor(np.zeros((1, 2, 8), np.float16))
        c.append(z, z)


def test_page_table_with_a_repeated_page_is_refused(dev, rng):
    """page_table=[1, 1] put cold positions 0..3 and 4..7 on one physical page: the second four overwrote the
    first, and attention over 10 rows was 0.64 off the float64 reference, silently. Now a ShapeError."""
    skip_unless_f16(dev, why=TIERED_HOT)
    with pytest.raises(wg.ShapeError, match=r"^TieredKVCache: page_table \[1, 1\] repeats page id 1; .* each once"):
        TieredKVCache(dev, kv_heads=1, head_dim=8, hot_window=2, cold_capacity=8, page_size=4, page_table=[1, 1])
    # a permutation is the pages' order: every cold row has its own place
    k, v = (rng.standard_normal((10, 1, 8)).astype(np.float16) for _ in range(2))
    cache = TieredKVCache(dev, kv_heads=1, head_dim=8, hot_window=2, cold_capacity=8, page_size=4, page_table=[1, 0])
    cache.append(dev.tensor(k), dev.tensor(v))
    q = rng.standard_normal((1, 1, 8)).astype(np.float32)
    out = cache.attention(dev.tensor(q), causal=True).numpy()
    np.testing.assert_allclose(out, R.attention(q, k, v, [9], np.arange(10)), atol=2e-5, rtol=0)


def test_refused_gpu_kv_len_leaves_the_cache_as_it_was(dev, rng):
    """append(kv_len=<f32 tensor>) raised kv_append's "a GPU position must be a u32 tensor" and had already set
    the cache's length to None (GPU-tracked): the next host append raised "this cache was appended with a GPU
    kv_len" and attention "this cache's length lives on the GPU". Now the error names TieredKVCache.append's
    kv_len, and the cache goes on from the length it had."""
    skip_unless_f16(dev, why=TIERED_HOT)
    k, v = (rng.standard_normal((3, 1, 8)).astype(np.float16) for _ in range(2))
    cache = TieredKVCache(dev, kv_heads=1, head_dim=8, hot_window=2, cold_capacity=4)
    cache.append(dev.tensor(k[:2]), dev.tensor(v[:2]))
    # a wrong dtype is a DtypeError, a u32 of two values a ShapeError
    for bad, error in ((np.array([3], np.float32), wg.DtypeError), (np.array([3, 3], np.uint32), wg.ShapeError)):
        with pytest.raises(error, match=r"^TieredKVCache.append: kv_len must be a u32 tensor with one value"):
            cache.append(dev.tensor(k[2:]), dev.tensor(v[2:]), kv_len=dev.tensor(bad))
    assert cache.length == 2
    cache.append(dev.tensor(k[2:]), dev.tensor(v[2:]))
    q = rng.standard_normal((1, 1, 8)).astype(np.float32)
    out = cache.attention(dev.tensor(q), causal=True).numpy()
    np.testing.assert_allclose(out, R.attention(q, k, v, [2], np.arange(3)), atol=2e-5, rtol=0)


def test_attention_refuses_what_the_cache_sets(dev):
    """cache.attention(q, causal=True, hot_window=1) raised Python's "TypeError: dict() got multiple values for
    keyword argument 'hot_window'"; now an ArgumentError naming the option and the ones there are."""
    skip_unless_f16(dev, why=TIERED_HOT)
    cache = TieredKVCache(dev, kv_heads=1, head_dim=8, hot_window=2, cold_capacity=4)
    cache.append(*(dev.tensor(np.ones((1, 1, 8), np.float16)) for _ in range(2)))
    q = dev.tensor(np.ones((1, 1, 8), np.float32))
    for name, value in (("hot_window", 1), ("page_size", 4), ("mode", "int8"), ("causl", True)):
        with pytest.raises(wg.ArgumentError, match=rf"^TieredKVCache.attention: {name}=.* is not an option .* the "
                                                   r"options are sliding_window, softcap, scale, window, return_lse"):
            cache.attention(q, causal=True, **{name: value})
    assert cache.attention(q, causal=True, sliding_window=1, softcap=5.0).shape == (1, 1, 8)


def test_attention_kv_len_other_than_the_length_is_refused(dev, rng):
    """A 5-row cache with a ring of 2: attention(kv_len=4) took slot 3 % 2 = 1 (holding row 3) and slot 2 % 2 = 0
    (holding row 4, which overwrote row 2) for keys 2 and 3, 0.72 off the float64 attention over rows 0..3, and
    kv_len=6 read a row never written; both silently. Now a ShapeError / LimitError naming both lengths; while
    every row is hot (no slot reused) a prefix is still right, and kv_len=5 is the cache's attention."""
    skip_unless_f16(dev, why=TIERED_HOT)
    k, v = (rng.standard_normal((5, 1, 8)).astype(np.float16) for _ in range(2))
    q = rng.standard_normal((1, 1, 8)).astype(np.float32)
    cache = TieredKVCache(dev, kv_heads=1, head_dim=8, hot_window=2, cold_capacity=4)
    cache.append(dev.tensor(k), dev.tensor(v))
    with pytest.raises(wg.ShapeError, match=r"^TieredKVCache.attention: kv_len 4 is below the cache's 5 rows; the ring "
                                            r"holds the newest 2"):
        cache.attention(dev.tensor(q), causal=True, kv_len=4)
    with pytest.raises(wg.LimitError, match=r"^TieredKVCache.attention: kv_len 6 is past the cache's 5 rows"):
        cache.attention(dev.tensor(q), causal=True, kv_len=np.int64(6))
    out = cache.attention(dev.tensor(q), causal=True, kv_len=5).numpy()
    np.testing.assert_allclose(out, R.attention(q, k, v, [4], np.arange(5)), atol=2e-5, rtol=0)
    hot = TieredKVCache(dev, kv_heads=1, head_dim=8, hot_window=8, cold_capacity=4)
    hot.append(dev.tensor(k), dev.tensor(v))
    out = hot.attention(dev.tensor(q), causal=True, kv_len=3).numpy()
    np.testing.assert_allclose(out, R.attention(q, k[:3], v[:3], [2], np.arange(3)), atol=2e-5, rtol=0)
