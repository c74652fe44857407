"""Tiered attention (f16 hot ring + f16 / int8 / int4 cold part, contiguous or paged) against float64 numpy."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.ops.tiered import tiered_attention, tiered_quant_attention

import kv_reference as R
from kernel_support import TIERED_HOT, skip_unless_f16


def _layout(rng, k, v, n, window, paged, page_size=4):
    """Hot ring [window] with rows at slot j % window, cold rows j < n - hot_len at row j or its page."""
    hot_len = min(n, window)
    cold_len = n - hot_len
    hot_k = np.zeros((window,) + k.shape[1:], k.dtype)
    hot_v = np.zeros_like(hot_k)
    for j in range(cold_len, n):
        hot_k[j % window], hot_v[j % window] = k[j], v[j]
    if paged:
        pages = -(-max(cold_len, 1) // page_size) + 1  # one spare page so the table is not the identity length
        table = rng.permutation(pages).astype(np.uint32)
        rows = R.paged_rows(cold_len, page_size, table)
        capacity = pages * page_size
    else:
        table, rows, capacity = None, np.arange(cold_len), max(cold_len, 1)
    return hot_k, hot_v, cold_len, rows, capacity, table


CASES = [  # S, Hq, Hkv, D, kv_len, hot_window, paged, causal, sliding_window, softcap
    (1, 4, 2, 32, 150, 16, False, True, 0, 0.0),
    (1, 4, 2, 64, 133, 16, True, True, 0, 0.0),
    (3, 4, 1, 32, 70, 8, True, True, 0, 0.0),
    (4, 4, 4, 16, 200, 32, True, True, 50, 5.0),
    (2, 2, 1, 128, 100, 16, False, False, 0, 0.0),
    (1, 2, 1, 16, 5, 8, False, True, 0, 0.0),  # all rows hot
    (2, 2, 1, 16, 20, 8, False, True, 2**32 - 1, 0.0),  # a window past 2^31 (was i32 -1: every key masked)
    (2, 4, 2, 32, 90, 16, True, True, 0, 1e8),  # a cap far above the scores: tanh near 0 (the builtin's error)
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("q_dtype", ["f32", "f16"])
def test_tiered_f16(dev, rng, case, q_dtype):
    skip_unless_f16(dev)   # f16 K and V
    S, hq, hkv, d, n, w, paged, causal, win, cap = case
    k = rng.standard_normal((n, hkv, d)).astype(np.float16)
    v = rng.standard_normal((n, hkv, d)).astype(np.float16)
    q = rng.standard_normal((S, hq, d)).astype(np.float32 if q_dtype == "f32" else np.float16)
    hot_k, hot_v, cold_len, rows, capacity, table = _layout(rng, k, v, n, w, paged)
    cold_k = np.zeros((capacity, hkv, d), np.float16)
    cold_v = np.zeros_like(cold_k)
    cold_k[rows], cold_v[rows] = k[:cold_len], v[:cold_len]
    out = tiered_attention(dev.tensor(q), dev.tensor(hot_k), dev.tensor(hot_v), dev.tensor(cold_k), dev.tensor(cold_v),
                           kv_len=n, page_table=None if table is None else dev.tensor(table), page_size=4,
                           causal=causal, sliding_window=win, softcap=cap)
    assert out.dtype == q_dtype
    want = R.attention(q, k, v, np.arange(n - S, n), np.arange(n), causal=causal, sliding_window=win, softcap=cap)
    # Inputs are exact in f16, so only the kernel's f32 math (and an f16 output's rounding, 2^-11) is error.
    atol = 2e-5 if q_dtype == "f32" else 2e-3
    np.testing.assert_allclose(out.numpy().astype(np.float64), want, atol=atol, rtol=0)


def _quant_bound(q, scale, k_scales, v_scales, v_abs_max, hq, hkv, d):
    """Derived bound: a cold element is within s/2 of its f16 value (kv_quantize rounds the scale up, so nothing
    clamps), so key j's error has L2 norm <= sqrt(D) * s_k[j]/2 and (Cauchy-Schwarz) its score moves by at most
    delta = scale * ||q_h|| * sqrt(D) * max s_k / 2. Softmax weights then change by at most expm1(2 delta) in L1,
    and a value by s_v/2: |o' - o| <= expm1(2 delta) * max|v| + max s_v / 2."""
    qn = np.linalg.norm(q.astype(np.float64), axis=-1).max()
    delta = scale * qn * np.sqrt(d) * k_scales.astype(np.float64).max() / 2
    return R.softmax_output_bound(delta, v_abs_max, v_scales.astype(np.float64).max() / 2)


@pytest.mark.parametrize("mode", ["int8", "int4"])
@pytest.mark.parametrize("paged", [False, True])
def test_tiered_quant(dev, rng, mode, paged):
    skip_unless_f16(dev, why=TIERED_HOT)
    S, hq, hkv, d, n, w = 2, 4, 2, 32, 140, 16
    k = rng.standard_normal((n, hkv, d)).astype(np.float16)
    v = rng.standard_normal((n, hkv, d)).astype(np.float16)
    q = rng.standard_normal((S, hq, d)).astype(np.float32)
    hot_k, hot_v, cold_len, rows, capacity, table = _layout(rng, k, v, n, w, paged)
    assert cold_len > 0 and n - cold_len > 0
    kc, ks = R.quantize(k[:cold_len].astype(np.float64), mode)
    vc, vs = R.quantize(v[:cold_len].astype(np.float64), mode)
    vpw = R.VALS_PER_WORD[mode]
    packed_k = np.zeros((capacity, hkv, d // vpw), np.uint32)
    packed_v = np.zeros_like(packed_k)
    sk = np.zeros((capacity, hkv), np.float16)
    sv = np.zeros_like(sk)
    packed_k[rows], packed_v[rows], sk[rows], sv[rows] = R.pack(kc, mode), R.pack(vc, mode), ks, vs
    out = tiered_quant_attention(
        dev.tensor(q), dev.tensor(hot_k), dev.tensor(hot_v), dev.tensor(packed_k), dev.tensor(packed_v),
        dev.tensor(sk), dev.tensor(sv), causal=True, mode=mode, kv_len=n,
        page_table=None if table is None else dev.tensor(table),
        page_size=4).numpy().astype(np.float64)
    qpos, kpos = np.arange(n - S, n), np.arange(n)
    # 1) the kernel computes attention over exactly the dequantized cold rows (f32 math only)
    kq, vq = k.astype(np.float64), v.astype(np.float64)
    kq[:cold_len], vq[:cold_len] = R.dequantize(kc, ks), R.dequantize(vc, vs)
    np.testing.assert_allclose(out, R.attention(q, kq, vq, qpos, kpos), atol=2e-5, rtol=0)
    # 2) against the unquantized values it stays within the bound derived from the quantization step
    exact = R.attention(q, k, v, qpos, kpos)
    bound = _quant_bound(q, 1 / np.sqrt(d), ks, vs, np.abs(v.astype(np.float64)).max(), hq, hkv, d) + 2e-5
    err = np.abs(out - exact).max()
    assert err <= bound, (err, bound)
    assert err > 1e-5  # the cold path really is quantized (an f16 cold part would be ~1e-7 off)


def test_tiered_kv_len_from_gpu_tensor(dev, rng):
    skip_unless_f16(dev, why=TIERED_HOT)
    hq, hkv, d, w = 2, 1, 16, 8
    k = rng.standard_normal((40, hkv, d)).astype(np.float16)
    v = rng.standard_normal((40, hkv, d)).astype(np.float16)
    q = rng.standard_normal((1, hq, d)).astype(np.float32)
    length = dev.tensor(np.array([0], np.uint32))
    for n in (3, 8, 9, 40):
        hot_k, hot_v, cold_len, rows, capacity, _ = _layout(rng, k, v, n, w, False)
        cold_k = np.zeros((40, hkv, d), np.float16)
        cold_v = np.zeros_like(cold_k)
        cold_k[:cold_len], cold_v[:cold_len] = k[:cold_len], v[:cold_len]
        dev.write(length, np.array([n], np.uint32))
        out = tiered_attention(dev.tensor(q), dev.tensor(hot_k), dev.tensor(hot_v), dev.tensor(cold_k),
                               dev.tensor(cold_v), causal=True, kv_len=length)
        want = R.attention(q, k[:n], v[:n], [n - 1], np.arange(n))
        np.testing.assert_allclose(out.numpy(), want, atol=2e-5, rtol=0)
    # A GPU length past the 8 hot + 40 cold rows is clamped to 48 (no read out of bounds) and reported.
    k = rng.standard_normal((48, hkv, d)).astype(np.float16)
    hot_k, hot_v, *_ = _layout(rng, k, k, 48, w, False)
    dev.write(length, np.array([60], np.uint32))
    out = tiered_attention(dev.tensor(q), dev.tensor(hot_k), dev.tensor(hot_v), dev.tensor(k[:40]), dev.tensor(k[:40]),
                           causal=True, kv_len=length)
    with pytest.raises(wg.GpuValueError, match=r"tiered_attention: the GPU kv_len was 60; it must be <= 48"):
        dev.check_errors()
    np.testing.assert_allclose(out.numpy(), R.attention(q, k, k, [47], np.arange(48)), atol=2e-5, rtol=0)


def test_tiered_errors(dev, rng):
    skip_unless_f16(dev, why=TIERED_HOT)
    q = dev.tensor(np.zeros((1, 4, 16), np.float32))
    hot = dev.tensor(np.zeros((8, 2, 16), np.float16))
    cold = dev.tensor(np.zeros((10, 2, 16), np.float16))
    with pytest.raises(wg.LimitError, match=r"kv_len 20 with hot_window 8 puts 12 rows in the cold part, which holds 10"):
        tiered_attention(q, hot, hot, cold, cold, causal=True, kv_len=20)
    with pytest.raises(wg.LimitError, match=r"hot_window 9 must be in 1..8"):
        tiered_attention(q, hot, hot, cold, cold, causal=True, kv_len=5, hot_window=9)
    with pytest.raises(wg.ShapeError, match="kv_len 0 is smaller than the 1 queries"):
        tiered_attention(q, hot, hot, cold, cold, causal=True, kv_len=0)
    with pytest.raises(wg.ShapeError, match="q heads 3 must be a multiple of kv heads 2"):
        tiered_attention(dev.tensor(np.zeros((1, 3, 16), np.float32)), hot, hot, cold, cold, causal=True, kv_len=5)
    with pytest.raises(wg.DtypeError, match="hot ring must be f16"):
        h32 = dev.tensor(np.zeros((8, 2, 16), np.float32))
        tiered_attention(q, h32, h32, cold, cold, causal=True, kv_len=5)
    big = dev.tensor(np.zeros((1, 2, 512), np.float32))
    hb = dev.tensor(np.zeros((8, 2, 512), np.float16))
    with pytest.raises(wg.LimitError, match="head_dim 512 is above the tiered_f16kv kernel's max_head_dim 256"):
        tiered_attention(big, hb, hb, hb, hb, causal=True, kv_len=5)
    pk = dev.tensor(np.zeros((10, 2, 4), np.uint32))
    with pytest.raises(wg.ShapeError, match=r"scales must be f16 \(10, 2\) .*for packed \(10, 2, 4\), got f16 \(10, 3\)"):
        tiered_quant_attention(q, hot, hot, pk, pk, dev.tensor(np.zeros((10, 3), np.float16)),
                               dev.tensor(np.zeros((10, 2), np.float16)), causal=True, mode="int8", kv_len=5)
    with pytest.raises(wg.ShapeError, match=r"packed int4 data must be u32 \(10, 2, 2\).*got u32 \(10, 2, 4\)"):
        s = dev.tensor(np.zeros((10, 2), np.float16))
        tiered_quant_attention(q, hot, hot, pk, pk, s, s, causal=True, mode="int4", kv_len=5)


@pytest.mark.parametrize("where", [2, 8])   # a cold key, a hot one (hot window 4 of 10 keys)
def test_tiered_nan_in_a_key_reaches_the_rows_that_see_it(dev, rng, where):
    """docs/errors.md ("NaN and Inf"): a NaN in a key makes the rows that see it NaN. The tiered loop dropped a NaN
    score as if the key were masked: the output was attention without that key, silently. The lse of those rows
    is NaN too (it was -inf: `l > 0` is false for a NaN l)."""
    skip_unless_f16(dev, why=TIERED_HOT)
    n, w = 10, 4
    k = rng.standard_normal((n, 1, 16)).astype(np.float16)
    v = rng.standard_normal((n, 1, 16)).astype(np.float16)
    k[where, 0, 5] = np.nan
    q = rng.standard_normal((2, 2, 16)).astype(np.float32)
    hot_k, hot_v, cold_len, rows, capacity, table = _layout(rng, k, v, n, w, False)
    cold_k = np.zeros((capacity, 1, 16), np.float16)
    cold_v = np.zeros_like(cold_k)
    cold_k[rows], cold_v[rows] = k[:cold_len], v[:cold_len]
    out, lse = tiered_attention(dev.tensor(q), dev.tensor(hot_k), dev.tensor(hot_v), dev.tensor(cold_k),
                                dev.tensor(cold_v), kv_len=n, causal=True, return_lse=True)
    assert np.isnan(out.numpy()).all()   # both queries (positions 8 and 9) see key `where`
    assert np.isnan(lse.numpy()).all()


def test_tiered_kv_len_past_i32_is_rejected(dev, rng):
    skip_unless_f16(dev, why=TIERED_HOT)
    # a paged cold part's capacity is table length x page_size (pages may repeat), so kv_len could pass 2^31 - 1;
    # the kernels place query i at i32(kv_len) - S + i, negative there: every key masked, zeros, silently
    f16 = lambda *s: dev.tensor(rng.standard_normal(s).astype(np.float16))
    q = dev.tensor(rng.standard_normal((1, 2, 16)).astype(np.float32))
    table = dev.tensor(np.zeros(2**21 + 1, np.uint32))   # 2^21 + 1 pages of 1024 rows: 2^31 + 1024 cold keys
    with pytest.raises(wg.LimitError, match=r"tiered_attention: kv_len 2147483656 is above 2147483647: the kernels "
                                            r"place the queries at positions kv_len - S \+ i in i32"):
        tiered_attention(q, f16(8, 1, 16), f16(8, 1, 16), f16(1024, 1, 16), f16(1024, 1, 16), kv_len=2**31 + 8,
                         causal=True, page_table=table, page_size=1024, sliding_window=4)


def test_tiered_infer_refuses_kv_len_past_i32_on_any_device():
    # the op's own check (a GPU has no loop cap to refuse the call first): before it, infer accepted kv_len 2^31 + 8
    from wgraph.ops.tiered import TieredParams, _infer
    from wgraph.tensor import TensorSpec
    f16 = lambda *s: TensorSpec(s, "f16")
    specs = (TensorSpec((1, 2, 16), "f32"), f16(8, 1, 16), f16(8, 1, 16), f16(1024, 1, 16), f16(1024, 1, 16), None,
             None, TensorSpec((2**21 + 1,), "u32"), None)
    with pytest.raises(wg.LimitError, match=r"kv_len 2147483656 is above 2147483647"):
        _infer(TieredParams(2**31 + 8, 8, 1024, True, 4), specs)
    assert _infer(TieredParams(2**31 - 1, 8, 1024, True, 4), specs)[0].shape == (1, 2, 16)


@pytest.mark.parametrize("causal", [True, False])
def test_tiered_gpu_kv_len_below_the_queries_is_reported(dev, rng, causal):
    """The queries are the last kv_len positions, so an int kv_len below S is a ShapeError; a GPU one was not
    checked: with S = 3 and kv_len 2, query 0 sat at position -1 and gave zeros (causal) or attended every key (not
    causal), a plausible answer and no error. Now it is reported; the keys a query can see are as before."""
    skip_unless_f16(dev, why=TIERED_HOT)
    hq, hkv, d, w, S, n = 2, 1, 16, 8, 3, 2
    k = rng.standard_normal((n, hkv, d)).astype(np.float16)
    v = rng.standard_normal((n, hkv, d)).astype(np.float16)
    q = rng.standard_normal((S, hq, d)).astype(np.float32)
    hot_k, hot_v, *_ = _layout(rng, k, v, n, w, False)
    cold = dev.tensor(np.zeros((4, hkv, d), np.float16))
    out = tiered_attention(dev.tensor(q), dev.tensor(hot_k), dev.tensor(hot_v), cold, cold, causal=causal,
                           kv_len=dev.tensor(np.array([n], np.uint32)))
    with pytest.raises(wg.GpuValueError, match=r"tiered_attention: the GPU kv_len was 2; it must be >= 3, the "
                                               r"queries"):
        dev.check_errors()
    want = R.attention(q, k, v, np.arange(S) + n - S, np.arange(n), causal=causal)
    np.testing.assert_allclose(out.numpy(), want, atol=2e-5, rtol=0)


@pytest.mark.parametrize("scale", [-1e29, -1e36, -2e37])
def test_tiered_very_negative_scores_are_not_masked(dev, rng, scale):
    """A key is masked by where it is, not by its score: every score of this row is below -5e29 (a large negative
    scale over positive q . k), which the loop's masked marker (-1e30) took for masked keys: zeros and lse -inf.
    float64: the softmax keeps the highest of those scores, so the output is that key's v (lse its score)."""
    skip_unless_f16(dev, why=TIERED_HOT)
    d, n, hot = 8, 5, 2
    q = np.ones((1, 1, d), np.float32)
    k = (1 + rng.random((n, 1, d))).astype(np.float16)      # every q . k in (8, 16)
    v = rng.standard_normal((n, 1, d)).astype(np.float16)
    hot_k, hot_v = np.zeros((hot, 1, d), np.float16), np.zeros((hot, 1, d), np.float16)
    hot_k[np.arange(n - hot, n) % hot], hot_v[np.arange(n - hot, n) % hot] = k[n - hot:], v[n - hot:]
    out, lse = tiered_attention(dev.tensor(q), dev.tensor(hot_k), dev.tensor(hot_v), dev.tensor(k[:n - hot]),
                                dev.tensor(v[:n - hot]), kv_len=n, causal=False, scale=scale, return_lse=True)
    s = k[:, 0].astype(np.float64) @ q[0, 0].astype(np.float64) * scale
    p = np.exp(s - s.max())
    np.testing.assert_allclose(out.numpy()[0, 0], p @ v[:, 0].astype(np.float64) / p.sum(), atol=1e-6)
    np.testing.assert_allclose(lse.numpy()[0, 0], s.max() + np.log(p.sum()), rtol=1e-6)


@pytest.mark.parametrize("quant", [None, "int8"])
def test_tiered_head_dim_zero_is_a_shape_error(dev, quant):
    """q, hot and cold [.., 0]: head_dim 0 passed every check and the default scale 1 / sqrt(0) raised Python's
    ZeroDivisionError; now the op's ShapeError, as attention's."""
    skip_unless_f16(dev, why=TIERED_HOT)
    q = dev.tensor(np.zeros((1, 2, 0), np.float32))
    hot = dev.tensor(np.zeros((4, 1, 0), np.float16))
    name = "tiered_attention" if quant is None else "tiered_quant_attention"
    with pytest.raises(wg.ShapeError, match=rf"^{name}: head_dim must be >= 1, got q \(1, 2, 0\)"):
        if quant is None:
            tiered_attention(q, hot, hot, hot, hot, kv_len=5, causal=True)
        else:
            packed, s = dev.tensor(np.zeros((4, 1, 0), np.uint32)), dev.tensor(np.zeros((4, 1), np.float16))
            tiered_quant_attention(q, hot, hot, packed, packed, s, s, mode=quant, kv_len=5, causal=True)


def test_tiered_page_id_past_an_odd_f16_pool_of_one_value_rows_is_reported(dev, rng):
    """An f16 cold pool of 3 rows of one value (kv_heads 1, head_dim 1) is 6 bytes, bound padded to 8: the kernel
    counted arrayLength's 4 values as 4 rows, so page id 3 (page_size 1) passed its check and read the padding as
    key 2, no error. The pool's pages now come from the host's shape: reported and clamped to the last page."""
    skip_unless_f16(dev, why=TIERED_HOT)
    k, v = (rng.standard_normal((4, 1, 1)).astype(np.float16) for _ in range(2))
    q = rng.standard_normal((1, 1, 1)).astype(np.float32)
    out = tiered_attention(dev.tensor(q), dev.tensor(k[3:]), dev.tensor(v[3:]), dev.tensor(k[:3]), dev.tensor(v[:3]),
                           kv_len=4, causal=True, page_table=dev.tensor(np.array([0, 1, 3], np.uint32)), page_size=1)
    with pytest.raises(wg.GpuValueError, match=r"tiered_attention: a GPU page_table page id was 3; it must be < 3"):
        dev.check_errors()
    np.testing.assert_allclose(out.numpy(), R.attention(q, k, v, [3], np.arange(4)), atol=2e-5, rtol=0)
