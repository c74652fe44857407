"""Positions across the whole accepted u32 range (issue: signed / wrapping arithmetic gave zeros or wrong rows):
large sliding windows, start_pos at and past 2^31, a ring whose key positions pass 2^32."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.ops.kv_cache import kv_append

from attention_reference import tolerance_check

U32_MAX = 2**32 - 1


def _check(dev, rng, S, L, *, kv_rows=None, **options):
    q = rng.standard_normal((S, 2, 16)).astype(np.float32)
    k, v = (rng.standard_normal((kv_rows or L, 1, 16)).astype(np.float32) for _ in range(2))
    got = wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(v), **options).numpy()
    ok, err, _, bound = tolerance_check(got, q, k, v, out_dtype=np.float32, **options)
    assert ok, (options, err, bound)
    assert np.abs(got).max() > 0  # every row sees keys here: zeros would be the old wrong answer


@pytest.mark.parametrize("S", [5, 1])  # prefill and decode
def test_sliding_window_up_to_u32_max(dev, rng, S):
    _check(dev, rng, S, 9, causal=True, sliding_window=U32_MAX)
    _check(dev, rng, S, 9, causal=False, sliding_window=2**31, start_pos=3)


@pytest.mark.parametrize("start_pos,S", [(2**31, 3), (2**31 - 4, 4), (U32_MAX - 3, 4), (U32_MAX, 1)])
def test_start_pos_past_2_31(dev, rng, start_pos, S):
    _check(dev, rng, S, 6, causal=True, start_pos=start_pos)  # keys at 0..5: every query sees them all
    _check(dev, rng, S, 6, causal=True, start_pos=start_pos, kv_start=start_pos - 5, sliding_window=4)


def test_ring_whose_key_positions_pass_2_32(dev, rng):
    for S in (6, 1):
        _check(dev, rng, S, 6, causal=True, kv_layout="ring", kv_start=U32_MAX - 2, kv_len=6)
    for S, window in ((3, 4), (1, 6)):  # 9 keys through a 6-row ring: the window keeps evicted keys out
        _check(dev, rng, S, 9, kv_rows=6, causal=True, kv_layout="ring", kv_start=U32_MAX - 2, kv_len=9,
               sliding_window=window)


def test_query_positions_past_u32_are_rejected(dev):
    x = dev.tensor(np.ones((4, 1, 8), np.float32))
    with pytest.raises(wg.LimitError, match=r"start_pos 4294967294 \+ 4 queries reaches position 4294967297; "
                                            r"positions are u32 \(at most 4294967295\)"):
        wg.ops.attention(x, x, x, causal=True, start_pos=U32_MAX - 1)


def test_kv_positions_stay_below_2_31(dev, rng):
    ring, ring_v = (dev.tensor(np.zeros((6, 1, 8), np.float32)) for _ in range(2))   # one buffer for both: AliasingError
    k = rng.standard_normal((2, 1, 8)).astype(np.float32)
    kv_append((ring, ring_v), dev.tensor(k), dev.tensor(k), 2**31 - 2, layout="ring")
    want = np.zeros((6, 1, 8), np.float32)
    want[(2**31 - 2) % 6], want[(2**31 - 1) % 6] = k[0], k[1]
    np.testing.assert_array_equal(ring.numpy(), want)
    np.testing.assert_array_equal(ring_v.numpy(), want)
    with pytest.raises(wg.LimitError, match=r"positions 2147483647..2147483648 \(pos \+ pos_offset \+ row\) pass 2147483647, the largest position"):
        kv_append((ring, ring_v), dev.tensor(k), dev.tensor(k), 2**31 - 1, layout="ring")


@pytest.mark.parametrize("gpu_pos, offset, row_pos", [(2**31 - 1, 0, "2147483648"),
                                                       (U32_MAX, -5, "429496729[01]"),   # either row, first kept
                                                       (U32_MAX, 3, "4294967295")])
def test_gpu_kv_positions_past_2_31_report_the_row_position(dev, rng, gpu_pos, offset, row_pos):
    """A GPU position whose row passes 2^31 - 1 is not written and is reported as the site says: the position of
    the row (GPU position + pos_offset + row index, 4294967295 when that passes 2^32 - 1) against 2^31. The kernel
    reported the GPU value alone against a per-row room: 'was 2147483647; it must be < 2147483647' for row 1 at
    2^31, and 'was 4294967295' for a row at 4294967290 (offset -5)."""
    ring, ring_v = (dev.tensor(np.zeros((6, 1, 8), np.float32)) for _ in range(2))
    k = rng.standard_normal((2, 1, 8)).astype(np.float32)
    kv_append((ring, ring_v), dev.tensor(k), dev.tensor(k), dev.tensor(np.array([gpu_pos], np.uint32)),
              layout="ring", pos_offset=offset)
    with pytest.raises(wg.GpuValueError, match=rf"kv_append: the position of a row .* was {row_pos}; it must be < "
                                               rf"2147483648"):
        dev.check_errors()
    if gpu_pos == 2**31 - 1:   # row 0, at 2^31 - 1, is written
        want = np.zeros((6, 1, 8), np.float32)
        want[(2**31 - 1) % 6] = k[0]
        np.testing.assert_array_equal(ring.numpy(), want)


@pytest.mark.parametrize("kv_len", [2**31, 2**31 - 5])
def test_ring_kv_len_up_to_2_31_is_exact(dev, rng, kv_len):
    # 16 queries at the end of kv_len keys through a 64-row ring (the window keeps evicted keys out). A ring
    # row is (kv_start + j) % rows, so the reference is the same keys as the last 128 from kv_start kv_len - 128
    q = rng.standard_normal((16, 2, 16)).astype(np.float32)
    k, v = (rng.standard_normal((64, 1, 16)).astype(np.float32) for _ in range(2))
    ring = dict(causal=True, kv_layout="ring", sliding_window=40)
    got = wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(v), kv_len=kv_len, **ring).numpy()
    ok, err, _, bound = tolerance_check(got, q, k, v, out_dtype=np.float32, kv_start=kv_len - 128, kv_len=128, **ring)
    assert ok, (err, bound)


def test_kv_len_past_2_31_is_rejected(dev, rng):
    # The key loops step past the last key in u32 (base += tile): kv_len 2^32 - 1 wrapped to key 0 and the
    # 16 queries got wrong rows (lavapipe; a GPU loops ~2^27 more times). Keys are indexed up to 2^31.
    q = dev.tensor(rng.standard_normal((16, 2, 16)).astype(np.float32))
    ring = dev.tensor(rng.standard_normal((64, 1, 16)).astype(np.float32))
    with pytest.raises(wg.LimitError, match=r"attention: kv_len 4294967295 is above 2147483648, the most keys the "
                                            r"attention kernels index"):
        wg.ops.attention(q, ring, ring, causal=True, kv_layout="ring", kv_len=U32_MAX, sliding_window=40)


def test_gpu_kv_len_past_2_31_is_clamped_and_reported(dev, rng):
    # a ring had no cap on a GPU kv_len: 2^32 - 1 ran, wrapping the key loops (wrong rows, silently)
    q = rng.standard_normal((16, 2, 16)).astype(np.float32)
    k, v = (rng.standard_normal((64, 1, 16)).astype(np.float32) for _ in range(2))
    ring = dict(causal=True, kv_layout="ring", sliding_window=40)
    n = dev.tensor(np.array([U32_MAX], np.uint32))
    got = wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(v), kv_len=n, **ring)
    with pytest.raises(wg.GpuValueError, match=r"4294967295.*2147483648"):
        got.numpy()
    ok, err, _, bound = tolerance_check(got.numpy(), q, k, v, out_dtype=np.float32, kv_start=2**31 - 128, kv_len=128,
                                        **ring)
    assert ok, (err, bound)   # computed as kv_len 2^31
