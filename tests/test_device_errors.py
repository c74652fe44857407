"""The device error flag: a kernel that reads a GPU kv_len or position beyond its limit stays in bounds and
reports it; dev.check_errors() and the next readback raise GpuValueError naming the op, the value and the limit."""

import numpy as np
import pytest

import wgraph as wg
from wgraph import device_errors
from wgraph.ops.dense import rope, rope_tables
from wgraph.ops.kv_cache import kv_append, kv_append_quantized

from attention_reference import tolerance_check
from kernel_support import QUANT_SCALES, TIERED_HOT, f16_or_f32, skip_unless_f16


def _u32(dev, value):
    return dev.tensor(np.array([value], np.uint32))


def test_every_wgsl_site_has_a_host_description():
    assert set(device_errors.CODES.values()) == set(device_errors.SITES)
    assert 0 not in device_errors.CODES


@pytest.mark.parametrize("S,variant", [(5, "prefill_streaming_f32"), (5, None), (1, None)])
def test_attention_gpu_kv_len_beyond_rows_is_clamped_and_reported(dev, rng, S, variant):
    q = rng.standard_normal((S, 2, 16)).astype(np.float32)
    k, v = (rng.standard_normal((8, 1, 16)).astype(np.float32) for _ in range(2))
    out = wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(v), causal=True, kv_len=_u32(dev, 12),
                           variant=variant)
    with pytest.raises(wg.GpuValueError, match=r"attention: the GPU kv_len \(of attention_kvcache with one sequence: "
                                               r"its cache_seqlens\) was 12; it must be <= 8"):
        dev.check_errors()
    dev.check_errors()  # the check cleared the flag
    ok, err, _, bound = tolerance_check(out.numpy(), q, k, v, out_dtype=np.float32, causal=True, kv_len=8)
    assert ok, (err, bound)  # clamped to the 8 rows the storage holds: nothing read out of bounds


# A ring of `rows` rows holds key position p at row p % rows (the last `rows` keys). With a GPU kv_len past the rows
# and a window wider than the ring (no window at all: every key), the kernels attended over the ring's keys only,
# silently, where the same int kv_len is refused (LimitError "ring of 4 rows holds the last 4 of kv_len 9 ...").
RING_KERNELS = [(1, None), (1, "decode_single_f32"), (1, "decode_splitk_g4_f32"), (1, "decode_chunked_f32"),
                (3, None), (3, "prefill_streaming_f32"), (3, "prefill_gemm_d64_f32")]


def _ring_of(keys, rows):
    """The ring of `rows` rows a cache holds after appending `keys` [n, Hkv, D] at positions 0..n-1."""
    ring = np.zeros((rows,) + keys.shape[1:], keys.dtype)
    for p in range(len(keys)):
        ring[p % rows] = keys[p]
    return ring


@pytest.mark.parametrize("S,variant", RING_KERNELS)
def test_ring_gpu_kv_len_past_the_ring_without_a_window_is_reported(dev, rng, S, variant):
    from kernel_support import lacks_subgroups

    if lacks_subgroups(dev, variant):
        pytest.skip("device has no subgroups")
    q = rng.standard_normal((S, 4, 16)).astype(np.float32)
    k, v = (rng.standard_normal((4, 2, 16)).astype(np.float32) for _ in range(2))
    tq, tk, tv = dev.tensor(q), dev.tensor(k), dev.tensor(v)
    with pytest.raises(wg.LimitError, match=r"ring of 4 rows holds the last 4 of kv_len 9 keys, but sliding_window 0"):
        wg.ops.attention(tq, tk, tv, causal=True, kv_layout="ring", kv_len=9, variant=variant)   # int: unchanged
    out = wg.ops.attention(tq, tk, tv, causal=True, kv_layout="ring", kv_len=_u32(dev, 9), variant=variant)
    with pytest.raises(wg.GpuValueError, match=r"attention: the GPU kv_len of a ring \(kv_layout='ring'\) was 9; it "
                                               r"must be <= 4, the largest kv_len whose keys the queries see the "
                                               r"ring still holds \(its rows"):
        out.numpy()
    dev.check_errors()   # the read cleared the flag
    # kv_len equal to the ring's rows, no window: every key is stored, nothing reported
    out = wg.ops.attention(tq, tk, tv, causal=True, kv_layout="ring", kv_len=_u32(dev, 4), variant=variant)
    ok, err, _, bound = tolerance_check(out.numpy(), q, k, v, out_dtype=np.float32, causal=True, kv_len=4)
    assert ok, (err, bound)


@pytest.mark.parametrize("S,variant", RING_KERNELS)
def test_ring_gpu_kv_len_far_past_the_ring_with_a_window_that_fits(dev, rng, S, variant):
    """Ring of 4 rows (decode; 6 for 3 queries), sliding_window 4, GPU kv_len 13: every query sees its 4 newest keys,
    all in the ring; the same as attention over the 13 keys laid out contiguously, in float64."""
    from kernel_support import lacks_subgroups

    if lacks_subgroups(dev, variant):
        pytest.skip("device has no subgroups")
    rows = 4 if S == 1 else 6
    q = rng.standard_normal((S, 4, 16)).astype(np.float32)
    k_all, v_all = (rng.standard_normal((13, 2, 16)).astype(np.float32) for _ in range(2))
    k, v = _ring_of(k_all, rows), _ring_of(v_all, rows)
    for window in (dict(sliding_window=4), dict(window=(3, 0))):
        out = wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(v), causal=True, kv_layout="ring",
                               kv_len=_u32(dev, 13), variant=variant, **window)
        ok, err, _, bound = tolerance_check(out.numpy(), q, k_all, v_all, out_dtype=np.float32, causal=True,
                                            sliding_window=4)
        assert ok, (window, err, bound)


@pytest.mark.parametrize("variant", ["decode_streaming_f32", "prefill_tiled_small_f32"])
def test_ring_gpu_kv_len_with_queries_placed_by_start_pos(dev, rng, variant):
    """Ring of 8 rows, sliding_window 10, kv_len 20 (keys 12..19 stored): queries placed at 24.. see keys from 15 on,
    all stored; placed at 20 the first sees from 11, which the ring dropped: reported, as an int kv_len is refused
    (the largest kv_len that keeps position 11 in the ring is 19)."""
    S = 1 if variant.startswith("decode") else 3
    q = rng.standard_normal((S, 4, 16)).astype(np.float32)
    k_all, v_all = (rng.standard_normal((20, 2, 16)).astype(np.float32) for _ in range(2))
    k, v = _ring_of(k_all, 8), _ring_of(v_all, 8)
    opt = dict(causal=True, kv_layout="ring", sliding_window=10, variant=variant)
    out = wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(v), kv_len=_u32(dev, 20), start_pos=24, **opt)
    ok, err, _, bound = tolerance_check(out.numpy(), q, k_all, v_all, out_dtype=np.float32, causal=True, kv_len=20,
                                        start_pos=24, sliding_window=10)
    assert ok, (err, bound)
    wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(v), kv_len=_u32(dev, 20), start_pos=20, **opt)
    with pytest.raises(wg.GpuValueError, match=r"the GPU kv_len of a ring \(kv_layout='ring'\) was 20; it must be "
                                               r"<= 19"):
        dev.check_errors()


def test_a_plain_read_checks_the_flag_in_its_own_submit(dev, rng):
    x = dev.tensor(np.arange(4, dtype=np.float32))
    dev.error_flag()  # exists, as after any kernel that reports
    before = dev.stats.snapshot()
    np.testing.assert_array_equal(x.numpy(), np.arange(4))
    delta = dev.stats.since(before)
    assert (delta.submits, delta.readbacks) == (1, 1)
    # an error reported inside a recording comes out of the next readback of anything
    cos, sin = (dev.tensor(t) for t in rope_tables(4, 8))
    with dev.record():
        rope(dev.tensor(rng.standard_normal((2, 1, 8)).astype(np.float32)), cos, sin, pos=_u32(dev, 3))
    before = dev.stats.snapshot()
    with pytest.raises(wg.GpuValueError, match=r"rope: the position of a row .* was 4; it must be < 4"):
        x.numpy()
    delta = dev.stats.since(before)
    assert (delta.submits, delta.readbacks) == (1, 1)
    np.testing.assert_array_equal(x.numpy(), np.arange(4))


def test_rope_gpu_position_near_2_32_does_not_wrap(dev, rng):
    cos, sin = (dev.tensor(t) for t in rope_tables(8, 8))
    x = rng.standard_normal((2, 1, 8)).astype(np.float32)
    y = rope(dev.tensor(x), cos, sin, pos=_u32(dev, 2**32 - 1))  # row 1 would wrap round to position 0
    with pytest.raises(wg.GpuValueError, match=r"rope: .* was 4294967295; it must be < 8"):
        dev.check_errors()
    np.testing.assert_array_equal(y.numpy(), np.zeros_like(x))


@pytest.mark.parametrize("pos", [7, 2**31 - 1, 2**32 - 1])
def test_kv_append_gpu_position_beyond_capacity_writes_nothing_and_reports(dev, rng, pos):
    dt = f16_or_f32(dev)
    kc, vc = (dev.tensor(np.zeros((8, 1, 8), dt)) for _ in range(2))
    k = rng.standard_normal((2, 1, 8)).astype(dt)
    kv_append((kc, vc), dev.tensor(k), dev.tensor(k), _u32(dev, pos))
    with pytest.raises(wg.GpuValueError, match=r"kv_append: the position of a row .* was \d+; it must be < \d+"):
        dev.check_errors()
    want = np.zeros((8, 1, 8), dt)
    if pos == 7:
        want[7] = k[0]  # the row that fits is written
    np.testing.assert_array_equal(kc.numpy(), want)


def test_kv_append_quantized_gpu_position_beyond_capacity_reports(dev, rng):
    skip_unless_f16(dev, why=QUANT_SCALES)
    packed = [dev.tensor(np.zeros((4, 1, 2), np.uint32)) for _ in range(2)]
    scales = [dev.tensor(np.zeros((4, 1), np.float16)) for _ in range(2)]
    k = dev.tensor(rng.standard_normal((1, 1, 8)).astype(np.float32))
    kv_append_quantized(((packed[0], scales[0]), (packed[1], scales[1])), k, k, _u32(dev, 4), mode="int8")
    with pytest.raises(wg.GpuValueError, match=r"kv_append_quantized: .* was 4; it must be < 4"):
        dev.check_errors()
    assert not packed[0].numpy().any()


def test_the_flag_is_made_again_with_the_device():
    dev = wg.Device()
    try:
        kc, vc = (dev.tensor(np.zeros((2, 1, 4), np.float32)) for _ in range(2))
        k = dev.tensor(np.ones((1, 1, 4), np.float32))
        kv_append((kc, vc), k, k, _u32(dev, 5))
        dev.recreate()
        dev.check_errors()  # the old device's error went with it
        kc, vc = (dev.tensor(np.zeros((2, 1, 4), np.float32)) for _ in range(2))
        k = dev.tensor(np.ones((1, 1, 4), np.float32))
        kv_append((kc, vc), k, k, _u32(dev, 2))
        with pytest.raises(wg.GpuValueError, match=r"was 2; it must be < 2"):
            kc.numpy()
    finally:
        dev.destroy()


# A page table on the GPU is read by the kernels (the host cannot check its ids): an id past the pages of the
# storage is reported by name, never a read or write elsewhere. Pool of 4 pages of 4 rows; the table's 2nd id is 7.
BAD_TABLE = np.array([2, 7], np.uint32)


@pytest.mark.parametrize("variant", [None, "decode_streaming_f32", "decode_splitk_g4_f32", "decode_fused_g4_f32",
                                     "decode_single_f32", "decode_chunked_f32", "decode_subgroup_f32"])
def test_attention_page_id_past_the_pool_is_clamped_and_reported(dev, rng, variant):
    from kernel_support import lacks_subgroups

    if lacks_subgroups(dev, variant):
        pytest.skip("device has no subgroups")
    q = rng.standard_normal((1, 4, 16)).astype(np.float32)
    k, v = (rng.standard_normal((16, 2, 16)).astype(np.float32) for _ in range(2))
    out = wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(v), causal=True, kv_layout="paged", page_size=4,
                           page_table=dev.tensor(BAD_TABLE), kv_len=6, variant=variant)
    with pytest.raises(wg.GpuValueError, match=r"attention: a GPU page_table page id \(.*\) was 7; it must be < 4, the "
                                               r"pages the k/v rows hold \(clamped to the last page"):
        dev.check_errors()
    # clamped: keys 4, 5 read rows 12, 13 (page 3)
    rows = np.array([8, 9, 10, 11, 12, 13])
    ok, err, _, bound = tolerance_check(out.numpy(), q, k[rows], v[rows], out_dtype=np.float32, causal=True)
    assert ok, (err, bound)


def test_kvcache_of_one_sequence_reports_a_page_id_past_the_pool(dev, rng):
    q = rng.standard_normal((1, 1, 4, 16)).astype(np.float32)
    k, v = (rng.standard_normal((16, 2, 16)).astype(np.float32) for _ in range(2))
    wg.ops.attention_kvcache(dev.tensor(q), dev.tensor(k), dev.tensor(v), cache_seqlens=[6], causal=True,
                             block_table=dev.tensor(BAD_TABLE[None]), page_size=4)
    with pytest.raises(wg.GpuValueError, match=r"attention: a GPU page_table page id \(of attention_kvcache with one "
                                               r"sequence: its block_table's\) was 7; it must be < 4"):
        dev.check_errors()


def test_kv_append_page_id_past_the_pool_writes_nothing_and_reports(dev, rng):
    dt = f16_or_f32(dev)
    kc, vc = (dev.tensor(np.zeros((16, 1, 8), dt)) for _ in range(2))
    k = rng.standard_normal((4, 1, 8)).astype(dt)
    kv_append((kc, vc), dev.tensor(k), dev.tensor(k), 2, layout="paged", page_size=4,
              page_table=dev.tensor(BAD_TABLE))
    with pytest.raises(wg.GpuValueError, match=r"kv_append: a GPU page_table page id was 7; it must be < 4, the pages "
                                               r"the cache holds \(the row not written"):
        dev.check_errors()
    want = np.zeros((16, 1, 8), dt)
    want[10:12] = k[:2]   # positions 2, 3 on page 2; positions 4, 5 (page id 7) not written anywhere
    np.testing.assert_array_equal(kc.numpy(), want)


def test_kv_append_quantized_page_id_past_the_pool_reports(dev, rng):
    skip_unless_f16(dev, why=QUANT_SCALES)
    packed = [dev.tensor(np.zeros((16, 1, 2), np.uint32)) for _ in range(2)]
    scales = [dev.tensor(np.zeros((16, 1), np.float16)) for _ in range(2)]
    k = dev.tensor(rng.standard_normal((4, 1, 8)).astype(np.float32))
    kv_append_quantized(((packed[0], scales[0]), (packed[1], scales[1])), k, k, 2, mode="int8", layout="paged",
                        page_size=4, page_table=dev.tensor(BAD_TABLE))
    with pytest.raises(wg.GpuValueError, match=r"kv_append_quantized: a GPU page_table page id was 7; it must be < 4"):
        dev.check_errors()
    written = packed[0].numpy().reshape(16, -1).any(axis=1)
    np.testing.assert_array_equal(np.flatnonzero(written), [10, 11])


def test_rope_kv_append_page_id_past_the_pool_reports(dev, rng):
    from wgraph.ops.rope_kv import rope_kv_append

    cos, sin = (dev.tensor(t) for t in rope_tables(16, 8))
    kc, vc = (dev.tensor(np.zeros((16, 1, 8), np.float32)) for _ in range(2))
    qkv = rng.standard_normal((4, 3 * 8)).astype(np.float32)
    rope_kv_append(dev.tensor(qkv), cos, sin, (kc, vc), 2, q_heads=1, layout="paged", page_size=4,
                   page_table=dev.tensor(BAD_TABLE))
    with pytest.raises(wg.GpuValueError, match=r"kv_append: a GPU page_table page id was 7; it must be < 4"):
        dev.check_errors()
    written = vc.numpy().reshape(16, -1).any(axis=1)
    np.testing.assert_array_equal(np.flatnonzero(written), [10, 11])
    np.testing.assert_array_equal(vc.numpy()[10:12, 0], qkv[:2, 16:])   # v heads as they are


def test_tiered_page_id_past_the_cold_pool_is_clamped_and_reported(dev, rng):
    from wgraph.ops.tiered import tiered_attention

    skip_unless_f16(dev, why=TIERED_HOT)
    q = rng.standard_normal((1, 2, 16)).astype(np.float32)
    hot = [dev.tensor(rng.standard_normal((4, 1, 16)).astype(np.float16)) for _ in range(2)]
    cold = [dev.tensor(rng.standard_normal((16, 1, 16)).astype(np.float16)) for _ in range(2)]
    tiered_attention(dev.tensor(q), *hot, *cold, kv_len=10, causal=True, hot_window=4,
                     page_table=dev.tensor(BAD_TABLE), page_size=4)
    with pytest.raises(wg.GpuValueError, match=r"tiered_attention: a GPU page_table page id was 7; it must be < 4"):
        dev.check_errors()


def test_a_gpu_scalar_is_one_value(dev, rng):
    """A GPU kv_len, position or step is a u32 tensor of exactly one value: a longer one was read at [0] silently."""
    two = dev.tensor(np.array([5, 7], np.uint32))
    x = dev.tensor(rng.standard_normal((6, 2, 16)).astype(np.float32))
    with pytest.raises(wg.ShapeError, match=r"attention: kv_len must be an int or a u32 tensor with one value, "
                                            r"got u32 \(2,\)"):
        wg.ops.attention(x, x, x, causal=True, kv_len=two)
    cos, sin = (dev.tensor(t) for t in rope_tables(8, 16))
    with pytest.raises(wg.ShapeError, match=r"rope: a GPU position must be a u32 tensor with one value, got \(2,\)"):
        rope(x, cos, sin, pos=two)
    with pytest.raises(wg.ShapeError, match=r"kv_append: a GPU position must be a u32 tensor with one value"):
        kv_append((x, dev.tensor(np.zeros((6, 2, 16), np.float32))), x, x, two)
    with pytest.raises(wg.ShapeError, match=r"sample: a GPU step must be a u32 tensor with one value"):
        wg.ops.sample(dev.tensor(np.zeros((1, 8), np.float32)), temperature=1.0, step=two)
