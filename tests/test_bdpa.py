"""BDPA decode: numpy decomposition (basis per token id + int8 residuals) and the in-kernel RoPE kernel."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.ops.bdpa import bdpa_attention, bdpa_decompose, rope_table

import kv_reference as R
from kernel_support import BDPA_BASIS, skip_unless_f16

L, HQ, HKV, D = 96, 4, 2, 32


def _sequence(rng):
    """Repeated tokens: K/V mostly a function of the token (shared residual rows), a third of rows perturbed."""
    ids = rng.integers(0, 9, L)
    base_k, base_v = rng.standard_normal((9, HKV, D)), rng.standard_normal((9, HKV, D))
    k, v = base_k[ids].copy(), base_v[ids].copy()
    noisy = rng.random(L) < 0.33
    k[noisy] += 0.2 * rng.standard_normal((noisy.sum(), HKV, D))
    v[noisy] += 0.2 * rng.standard_normal((noisy.sum(), HKV, D))
    positions = np.sort(rng.choice(200, L, replace=False))  # original positions with gaps (compacted cache)
    return ids, k, v, positions


def _reconstruct(h):
    """K/V [L, 2, H, D] from the host arrays with the reference unpacker (not the code under test)."""
    b, r = h.index[:, 0], h.index[:, 1]
    res = R.dequantize(R.unpack(h.residual, "int8"), h.residual_scale)
    return h.basis.astype(np.float64)[b] + res[r]


def test_decomposition_shares_rows_and_meets_its_bound(rng):
    ids, k, v, pos = _sequence(rng)
    h = bdpa_decompose(k, v, ids, pos)
    assert h.basis.shape == (len(np.unique(ids)), 2, HKV, D)
    assert h.residual.shape[0] < L  # repeated clean tokens share one residual row
    np.testing.assert_array_equal(h.index[:, 2], pos)
    err = np.abs(_reconstruct(h) - np.stack([k, v], 1))
    # residual taken against the f16 basis and quantized with scale >= max|res|/127: error <= scale/2
    s = h.residual_scale.astype(np.float64)[h.index[:, 1]][..., None]
    assert np.all(err <= s * (0.5 + 1e-9) + 1e-12)


@pytest.mark.parametrize("window", [0, 40, 2**32 - 1])  # 2^32 - 1: no i32 wrap
def test_bdpa_attention(dev, rng, window):
    skip_unless_f16(dev, why=BDPA_BASIS)
    ids, k, v, pos = _sequence(rng)
    h = bdpa_decompose(k, v, ids, pos)
    cos, sin = R.rope_tables(256, D)
    q = rng.standard_normal((1, HQ, D)).astype(np.float32)
    q_pos = int(pos[-1]) - 3  # the last few keys are in the future: causal masking by original position
    out = bdpa_attention(dev.tensor(q), h.upload(dev), dev.tensor(rope_table(cos, sin)), causal=True, q_pos=q_pos,
                         sliding_window=window).numpy().astype(np.float64)
    # 1) exactly the decomposition's K/V, rotated at the original positions (f32 math and tables only)
    kv = _reconstruct(h)
    exact_dec = R.attention(q, R.rope(kv[:, 0], pos, cos, sin), kv[:, 1], [q_pos], pos, sliding_window=window)
    np.testing.assert_allclose(out, exact_dec, atol=2e-5, rtol=0)
    # 2) the documented bound against the original K/V: element error <= s/2, RoPE keeps the L2 norm, so a score
    #    moves by <= scale*||q||*sqrt(D)*max s_k/2 and the output by expm1(2 delta)*max|v| + max s_v/2.
    want = R.attention(q, R.rope(k, pos, cos, sin), v, [q_pos], pos, sliding_window=window)
    sk, sv = h.residual_scale[:, 0].astype(np.float64).max(), h.residual_scale[:, 1].astype(np.float64).max()
    delta = np.linalg.norm(q, axis=-1).max() / np.sqrt(D) * np.sqrt(D) * sk / 2
    bound = R.softmax_output_bound(delta, np.abs(v).max(), sv / 2) + 2e-5
    err = np.abs(out - want).max()
    assert 1e-6 < err <= bound, (err, bound)


def test_bdpa_kv_len_from_gpu_tensor(dev, rng):
    skip_unless_f16(dev, why=BDPA_BASIS)
    ids, k, v, pos = _sequence(rng)
    h = bdpa_decompose(k, v, ids, pos)
    cos, sin = R.rope_tables(256, D)
    q = rng.standard_normal((1, HQ, D)).astype(np.float32)
    n = 50
    out = bdpa_attention(dev.tensor(q), h.upload(dev), dev.tensor(rope_table(cos, sin)), causal=True, q_pos=255,
                         kv_len=dev.tensor(np.array([n], np.uint32))).numpy()
    kv = _reconstruct(h)[:n]
    want = R.attention(q, R.rope(kv[:, 0], pos[:n], cos, sin), kv[:, 1], [255], pos[:n])
    np.testing.assert_allclose(out, want, atol=2e-5, rtol=0)
    # a GPU length past the index's 96 rows is clamped to them (no read out of bounds) and reported
    out = bdpa_attention(dev.tensor(q), h.upload(dev), dev.tensor(rope_table(cos, sin)), causal=True, q_pos=255,
                         kv_len=dev.tensor(np.array([500], np.uint32)))
    with pytest.raises(wg.GpuValueError, match=rf"bdpa_attention: the GPU kv_len was 500; it must be <= {L}"):
        dev.check_errors()
    kv = _reconstruct(h)
    want = R.attention(q, R.rope(kv[:, 0], pos, cos, sin), kv[:, 1], [255], pos)
    np.testing.assert_allclose(out.numpy(), want, atol=2e-5, rtol=0)


def test_bdpa_errors(dev, rng):
    skip_unless_f16(dev, why=BDPA_BASIS)
    ids, k, v, pos = _sequence(rng)
    cache = bdpa_decompose(k, v, ids, pos).upload(dev)
    cos, sin = R.rope_tables(256, D)
    rope = dev.tensor(rope_table(cos, sin))
    q = dev.tensor(rng.standard_normal((1, HQ, D)).astype(np.float32))
    short = dev.tensor(rope_table(cos[:100], sin[:100]))
    with pytest.raises(wg.LimitError, match=rf"position {pos.max()}, beyond the RoPE table's 100 positions"):
        bdpa_attention(q, cache, short, causal=True, q_pos=0)
    with pytest.raises(wg.ShapeError, match=r"decode only, q must be \[1, Hq, D\], got \(2, 4, 32\)"):
        bdpa_attention(dev.tensor(np.zeros((2, HQ, D), np.float32)), cache, rope, causal=True, q_pos=0)
    with pytest.raises(wg.LimitError, match=rf"kv_len {L + 1} is beyond the index's {L} rows"):
        bdpa_attention(q, cache, rope, causal=True, q_pos=0, kv_len=L + 1)
    with pytest.raises(wg.ShapeError, match=r"rope must be f32 \[positions, 2, 16\]"):
        bdpa_attention(q, cache, dev.tensor(np.zeros((256, 16), np.float32)), causal=True, q_pos=0)
    with pytest.raises(wg.ShapeError, match=r"token_ids \(3,\) and positions \(96,\) must be \(96,\)"):
        bdpa_decompose(k, v, ids[:3], pos)
    with pytest.raises(wg.ShapeError, match=r"bdpa_decompose: k and v \(0, 2, 32\) hold no rows"):
        bdpa_decompose(k[:0], v[:0], ids[:0], pos[:0])
    # the kernel compares positions in i32: q_pos 2^31 masked every key (zeros out, silently)
    with pytest.raises(wg.ArgumentError, match=r"bdpa_attention: q_pos=2147483648 must be an integer in "
                                               r"\[0, 2147483647\]"):
        bdpa_attention(q, cache, rope, causal=True, q_pos=2**31)


def test_bdpa_nan_in_a_key_reaches_the_output(dev, rng):
    """A NaN in a key the query sees makes its output NaN (docs/errors.md, "NaN and Inf"): the loop dropped a
    NaN score as if the key were masked (a finite output, 0.92 off the reference)."""
    skip_unless_f16(dev, why=BDPA_BASIS)
    ids, k, v, pos = _sequence(rng)
    k[5, 0, 3] = np.nan
    cos, sin = R.rope_tables(256, D)
    out = bdpa_attention(dev.tensor(rng.standard_normal((1, HQ, D)).astype(np.float32)),
                         bdpa_decompose(k, v, ids, pos).upload(dev), dev.tensor(rope_table(cos, sin)), causal=True,
                         q_pos=int(pos.max())).numpy()
    assert np.isnan(out[0, :HQ // HKV]).all()   # the q heads of kv head 0 see the NaN key


@pytest.mark.parametrize("field, bad, site", [
    (0, 1000, r"a basis id read from the GPU index was 1000; it must be < {nb}"),
    (1, 4294967295, r"a residual id read from the GPU index was 4294967295; it must be < {nr}"),
    (2, 256, r"an original position read from the GPU index was 256; it must be < 256"),
])
def test_bdpa_index_out_of_range_is_reported_and_its_key_skipped(dev, rng, field, bad, site):
    """The index [L, 3] lives on the GPU (a BDPACache may be built from any u32 tensor, and a graph's rope table is
    not checked on the host): a basis id, residual id or position past its table was read clamped by robust
    buffer access: no error, and an output 0.007 (basis id 1000), 0.061 (residual id 2^32 - 1), 0.020 (position
    256 of a 256-row table) off the reference without that key. Now the key is skipped (as masked) and reported."""
    skip_unless_f16(dev, why=BDPA_BASIS)
    ids, k, v, pos = _sequence(rng)
    h = bdpa_decompose(k, v, ids, pos)
    cos, sin = R.rope_tables(256, D)
    q = rng.standard_normal((1, HQ, D)).astype(np.float32)
    c = h.upload(dev)
    index = h.index.copy()
    index[7, field] = bad
    cache = wg.ops.BDPACache(c.basis, c.residual, c.residual_scale, dev.tensor(index), max_position=int(pos.max()))
    out = bdpa_attention(dev.tensor(q), cache, dev.tensor(rope_table(cos, sin)), causal=False, q_pos=255)
    nb, nr = h.basis.shape[0], h.residual.shape[0]
    with pytest.raises(wg.GpuValueError, match="bdpa_attention: " + site.format(nb=nb, nr=nr)):
        dev.check_errors()
    keep = np.arange(L) != 7
    kv = _reconstruct(h)[keep]
    want = R.attention(q, R.rope(kv[:, 0], pos[keep], cos, sin), kv[:, 1], [255], pos[keep], causal=False)
    np.testing.assert_allclose(out.numpy(), want, atol=2e-5, rtol=0)


def test_decompose_refuses_positions_that_are_not_integers(rng):
    """positions [0.5, 1.7, 2.9] (or [0, 1, 2.5], or booleans) went into the u32 index truncated, as 0, 1, 2:
    keys masked at positions they were not given, silently. Now an ArgumentError naming them."""
    ids, k, v, _ = _sequence(rng)
    for bad in (np.arange(L) + 0.5, list(range(L - 1)) + [L + 0.5], np.arange(L) % 2 == 0):
        with pytest.raises(wg.ArgumentError, match=r"(?s)^bdpa_decompose: positions=.* must be integers"):
            bdpa_decompose(k, v, ids, bad)
    # integer arrays of any width, and lists of Python ints, are positions
    for good in (np.arange(L, dtype=np.uint16), list(range(L)), np.arange(L, dtype=np.int64) * 3):
        np.testing.assert_array_equal(bdpa_decompose(k, v, ids, good).index[:, 2], np.asarray(good))


def test_decompose_refuses_token_ids_that_are_not_ids():
    """token_ids went to np.unique unchecked: [True, 2, 1, 3] gave rows 0 and 2 one basis row (True == 1), 1.5 and
    "a" were ids, a ragged list raised numpy's raw ValueError and [None] * 4 a raw TypeError; a ragged positions
    list the raw ValueError too. Now the id-list rule's ArgumentError naming them (docs/errors.md)."""
    k = np.ones((4, 1, 8))
    for bad in ([True, 2, 1, 3], [1.5, 2, 1, 3], ["a", "b", "a", "c"], [[1], [2, 3], 1, 3], [None] * 4,
                [-1, 2, 1, 3], np.array([1.0, 2.0, 1.0, 3.0])):
        with pytest.raises(wg.ArgumentError, match=r"(?s)^bdpa_decompose: token_ids=.* must be a list of integers"):
            bdpa_decompose(k, k, bad)
    with pytest.raises(wg.ArgumentError, match=r"(?s)^bdpa_decompose: positions=.* must be integers"):
        bdpa_decompose(k, k, [1, 2, 1, 3], [[0], [1, 2], 3, 4])
    # integer ids of any spelling group rows by token: rows 0 and 2 share basis row 0
    for good in ([1, 2, 1, 3], (1, 2, 1, 3), np.array([1, 2, 1, 3], np.uint8), [np.int64(1), 2, 1, 3]):
        np.testing.assert_array_equal(bdpa_decompose(k, k, good).index[:, 0], [0, 1, 0, 2])


def test_decompose_keeps_a_nan_or_inf_to_its_own_row(dev, rng):
    """Tokens [1, 2, 1, 3, 1] at positions [0, 1, 9, 2, 3]: a NaN in row 2's k and an inf in row 4's v (positions 9
    and 3, after q_pos 2: causal masks both) went into token 1's f16 basis, the mean of rows 0, 2 and 4, so row 0
    (position 0, seen) read NaN and every output was NaN where float64 is finite. Now a row holding NaN or inf has
    a basis row of its own: the rows that see no such key are exact, and one that does is NaN where float64 is
    (a NaN in v[j, g, d]: dim d of the q heads of kv head g only, docs/errors.md nan-propagates)."""
    skip_unless_f16(dev, why=BDPA_BASIS)
    hkv, d = 2, 8
    # f16-exact K/V and one finite row per token: the decomposition is exact (residuals 0), so the kernel's f32
    # math is the only error
    k, v = (rng.standard_normal((5, hkv, d)).astype(np.float16).astype(np.float64) for _ in range(2))
    k[2, 0, 3], v[4, 1, 5] = np.nan, np.inf
    ids, pos = [1, 2, 1, 3, 1], np.array([0, 1, 9, 2, 3])
    cos, sin = R.rope_tables(16, d)
    cache, rope = bdpa_decompose(k, v, ids, pos).upload(dev), dev.tensor(rope_table(cos, sin))
    q = rng.standard_normal((1, 4, d)).astype(np.float32)
    out = bdpa_attention(dev.tensor(q), cache, rope, causal=True, q_pos=2).numpy()
    seen = pos <= 2
    want = R.attention(q, R.rope(k[seen], pos[seen], cos, sin), v[seen], [2], pos[seen])
    np.testing.assert_allclose(out, want, atol=2e-5, rtol=0)
    # seen: a NaN in v[0, 1, 6] reaches dim 6 of q heads 2 and 3 only
    v[0, 1, 6] = np.nan
    out = bdpa_attention(dev.tensor(q), bdpa_decompose(k, v, ids, pos).upload(dev), rope, causal=True,
                         q_pos=2).numpy()
    want = R.attention(q, R.rope(k[seen], pos[seen], cos, sin), v[seen], [2], pos[seen])
    assert np.array_equal(np.isnan(out), np.isnan(want)) and np.isnan(want).sum() == 2
    np.testing.assert_allclose(out, want, atol=2e-5, rtol=0)


def test_decompose_refuses_values_past_f16(rng):
    """k[0] = 1e5 (an f16 basis of inf) or rows +-1e7 of one token (basis 0, a residual scale 1e7 / 127, past
    65504: inf) decomposed without a word, and bdpa_attention returned NaN for every query that saw the token's
    rows. Now an ArgumentError naming the element and f16's largest."""
    k, v = rng.standard_normal((4, 1, 8)), rng.standard_normal((4, 1, 8))
    big = k.copy()
    big[0, 0, 2] = 1e5
    with pytest.raises(wg.ArgumentError, match=r"^bdpa_decompose: k\[0, 0, 2\] = 100000 is past f16's largest, 65504"):
        bdpa_decompose(big, v, [1, 1, 2, 2])
    pair = v.copy()
    pair[2, 0, 7], pair[3, 0, 7] = 1e7, -1e7
    with pytest.raises(wg.ArgumentError, match=r"^bdpa_decompose: v\[2, 0, 7\] = 1e\+07 is past f16's largest"):
        bdpa_decompose(k, pair, [1, 1, 2, 2])
    # f16's largest itself is a value: the basis holds it, the residuals are 0
    edge = k.copy()
    edge[:2] = -65504.0
    h = bdpa_decompose(edge, v, [1, 1, 2, 2])
    assert h.basis[0, 0].astype(np.float64).min() == -65504.0 and np.isfinite(h.residual_scale.astype(np.float64)).all()


def test_zero_head_dim_or_kv_heads_are_shape_errors(dev, rng):
    """head_dim 0 (bdpa_decompose: numpy's 'zero-size array to reduction operation maximum'; bdpa_attention: a
    ZeroDivisionError from the default scale 1 / sqrt(0)) and a basis of 0 kv heads (a ZeroDivisionError from
    hq % 0) escaped as Python's errors; now ShapeErrors naming the shape."""
    skip_unless_f16(dev, why=BDPA_BASIS)
    with pytest.raises(wg.ShapeError, match=r"^bdpa_decompose: head_dim 0 must be a positive multiple of 4"):
        bdpa_decompose(np.ones((2, 1, 0)), np.ones((2, 1, 0)), [0, 1])
    c = bdpa_decompose(np.ones((3, 1, 4)), np.ones((3, 1, 4)), [0, 1, 0]).upload(dev)
    z = lambda *s, dt=np.float16: dev.tensor(np.zeros(s, dt))
    empty = wg.ops.BDPACache(z(2, 2, 1, 0), z(2, 2, 1, 0, dt=np.uint32), z(2, 2, 1), c.index, 2)
    with pytest.raises(wg.ShapeError, match=r"^bdpa_attention: head_dim must be >= 1, got q \(1, 1, 0\)"):
        bdpa_attention(z(1, 1, 0, dt=np.float32), empty, z(8, 2, 0, dt=np.float32), q_pos=3, causal=True)
    no_heads = wg.ops.BDPACache(z(2, 2, 0, 4), z(2, 2, 0, 1, dt=np.uint32), z(2, 2, 0), c.index, 2)
    with pytest.raises(wg.ShapeError, match=r"^bdpa_attention: q heads 2 must be a multiple of kv heads 0"):
        bdpa_attention(z(1, 2, 4, dt=np.float32), no_heads, z(8, 2, 2, dt=np.float32), q_pos=3, causal=True)


def test_decompose_refuses_complex_kv(rng):
    """k = 1 + 2j (complex128, or a list of Python complex) decomposed as its real part 1 (numpy's ComplexWarning
    only): attention over keys that were not the caller's. Now the ShapeError for arrays that are not real."""
    k, v = rng.standard_normal((2, 1, 4)), rng.standard_normal((2, 1, 4))
    for bad_k, bad_v in ((k + 2j, v), (k, (v * 1j).tolist())):
        with pytest.raises(wg.ShapeError, match=r"^bdpa_decompose: k and v must be real arrays \[L, Hkv, D\], got a "
                                                r"complex [kv] \(complex128\)"):
            bdpa_decompose(bad_k, bad_v, [0, 1])
