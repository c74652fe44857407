"""kv_append (contiguous, ring, paged; int or GPU position), kv_quantize / kv_dequantize against numpy."""

import json

import attrs
import numpy as np
import pytest

import wgraph as wg
from wgraph.ops.kv_cache import QuantizedKV, kv_append, kv_append_quantized, kv_dequantize, kv_quantize

import kv_reference as R
from kernel_support import QUANT_SCALES, f16_or_f32, skip_unless_f16


def _rows(rng, n, heads=2, dim=8, dtype=np.float16):
    return rng.standard_normal((n, heads, dim)).astype(dtype)


def _cache(dev, rows, heads=2, dim=8, dtype=np.float16):
    return dev.tensor(np.zeros((rows, heads, dim), dtype)), dev.tensor(np.zeros((rows, heads, dim), dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_append_contiguous(dev, rng, dtype):
    skip_unless_f16(dev, dtype)
    kc, vc = _cache(dev, 10, dtype=dtype)
    k1, v1, k2, v2 = (_rows(rng, n, dtype=dtype) for n in (4, 4, 3, 3))
    kv_append((kc, vc), dev.tensor(k1), dev.tensor(v1), 0)
    kv_append((kc, vc), dev.tensor(k2), dev.tensor(v2), 4)
    want_k = np.zeros((10, 2, 8), dtype); want_k[:4], want_k[4:7] = k1, k2
    want_v = np.zeros((10, 2, 8), dtype); want_v[:4], want_v[4:7] = v1, v2
    np.testing.assert_array_equal(kc.numpy(), want_k)
    np.testing.assert_array_equal(vc.numpy(), want_v)


def test_append_ring_wraps(dev, rng):
    dt = f16_or_f32(dev)
    kc, vc = _cache(dev, 5, dtype=dt)
    want = np.zeros((5, 2, 8), dt)
    for pos, n in ((0, 3), (3, 4), (7, 5)):  # the second and third appends wrap around the end
        k = _rows(rng, n, dtype=dt)
        kv_append((kc, vc), dev.tensor(k), dev.tensor(k), pos, layout="ring")
        for r in range(n):
            want[(pos + r) % 5] = k[r]
    np.testing.assert_array_equal(kc.numpy(), want)


def test_append_paged_across_page_boundaries(dev, rng):
    page_size, table = 4, np.array([2, 0, 3, 1], np.uint32)
    dt = f16_or_f32(dev)
    kc, vc = _cache(dev, 16, dtype=dt)
    pt = dev.tensor(table)
    logical = np.zeros((16, 2, 8), dt)
    for pos, n in ((0, 3), (3, 2), (5, 7), (12, 4)):  # rows 3|4, 7|8|... straddle pages
        k = _rows(rng, n, dtype=dt)
        kv_append((kc, vc), dev.tensor(k), dev.tensor(k), pos, layout="paged", page_table=pt, page_size=page_size)
        logical[pos:pos + n] = k
    want = np.zeros_like(logical)
    want[R.paged_rows(16, page_size, table)] = logical
    np.testing.assert_array_equal(kc.numpy(), want)


def test_append_position_from_gpu_tensor(dev, rng):
    dt = f16_or_f32(dev)
    kc, vc = _cache(dev, 6, dtype=dt)
    pos = dev.tensor(np.array([0], np.uint32))
    want = np.zeros((6, 2, 8), dt)
    for p in (0, 1, 4, 7, 9):
        k = _rows(rng, 1, dtype=dt)
        dev.write(pos, np.array([p], np.uint32))
        kv_append((kc, vc), dev.tensor(k), dev.tensor(k), pos, layout="ring")
        want[p % 6] = k[0]
    np.testing.assert_array_equal(kc.numpy(), want)
    # pos_offset is added to the GPU value: the length tensor of a decode step drives the append
    dev.write(pos, np.array([3], np.uint32))
    k = _rows(rng, 1, dtype=dt)
    kv_append((kc, vc), dev.tensor(k), dev.tensor(k), pos, layout="ring", pos_offset=-1)
    want[2] = k[0]
    np.testing.assert_array_equal(kc.numpy(), want)


def test_append_errors(dev, rng):
    dt = f16_or_f32(dev)
    name = wg.dtypes.dtype_name_of(dt)
    other = "f32" if name == "f16" else "bf16"   # a dtype that differs from the caches' and needs no feature

    def rows(n, dim=8):
        return dev.tensor(_rows(rng, n, dim=dim, dtype=dt))

    kc, vc = _cache(dev, 8, dtype=dt)
    k = rows(3)
    with pytest.raises(wg.LimitError, match=r"cache full.*position 6 \(pos \+ pos_offset\) needs 9 rows, the cache holds 8"):
        kv_append((kc, vc), k, k, 6)
    with pytest.raises(wg.LimitError, match=r"position 8 \(pos \+ pos_offset\) is beyond the cache capacity of 8"):
        kv_append((kc, vc), k, k, 8)
    none = rows(0)   # no rows: the end of the cache is a position, past it is not (it read "cache full ... 9 rows")
    kv_append((kc, vc), none, none, 8)
    with pytest.raises(wg.LimitError, match=r"position 9 \(pos \+ pos_offset\) is beyond the cache capacity of 8"):
        kv_append((kc, vc), none, none, 9)
    with pytest.raises(wg.ArgumentError, match=r"kv_append: pos=-1 must be an integer in \[0, 4294967295\] or a "):
        kv_append((kc, vc), k, k, -1)
    with pytest.raises(wg.ArgumentError, match=r"kv_append: pos=-2 must be an integer in \[0, "):   # not row 1
        kv_append((kc, vc), k, k, -2, pos_offset=3)
    with pytest.raises(wg.ArgumentError, match=r"kv_append: pos \+ pos_offset=-1 must be an integer in \[0, "):
        kv_append((kc, vc), k, k, 2, pos_offset=-3)
    # k and v rows go to the same positions: as many of each, into caches of one dtype and rows
    with pytest.raises(wg.ShapeError, match=r"kv_append: k_new has 2 rows and v_new 3; .* the same number of rows"):
        kv_append((kc, vc), rows(2), rows(3), 0)
    with pytest.raises(wg.DtypeError, match=rf"kv_append: the k cache is {name} and the v cache {other}; they must "):
        kv_append((kc, dev.tensor(np.zeros((8, 2, 8), np.float32), dtype=other)), k, k, 0)
    with pytest.raises(wg.ShapeError, match=r"kv_append: the k cache has 8 rows and the v cache 16"):
        kv_append((kc, dev.tensor(np.zeros((16, 2, 8), dt))), k, k, 0)
    np.testing.assert_array_equal(kc.numpy(), 0)   # every refusal above wrote nothing
    with pytest.raises(wg.LimitError, match=r"9 rows into a ring of 8"):
        kv_append((kc, vc), rows(9), rows(9), 0, layout="ring")
    with pytest.raises(wg.LimitError, match=r"cache full.*needs 10 rows, the cache holds 8"):
        kv_append((kc, vc), k, k, 7, layout="paged", page_table=dev.tensor(np.arange(2, dtype=np.uint32)),
                  page_size=4)
    with pytest.raises(wg.ShapeError, match="needs page_table"):
        kv_append((kc, vc), k, k, 0, layout="paged", page_size=4)
    with pytest.raises(wg.ShapeError, match=r"page_size > 0 that divides it, got page_size=3"):
        kv_append((kc, vc), k, k, 0, layout="paged", page_table=dev.tensor(np.arange(2, dtype=np.uint32)),
                  page_size=3)
    with pytest.raises(wg.ShapeError, match=r"cache \(8, 2, 8\) does not match rows \(3, 2, 4\)"):
        kv_append((kc, vc), rows(3, dim=4), rows(3, dim=4), 0)
    with pytest.raises(wg.DtypeError, match=f"cache dtype {name} differs from the new rows' {other}"):
        odd = dev.tensor(_rows(rng, 3, dtype=np.float32), dtype=other)
        kv_append((kc, vc), odd, odd, 0)
    with pytest.raises(wg.ArgumentError, match="layout='rings' must be one of"):
        kv_append((kc, vc), k, k, 0, layout="rings")


def _quant_case(rng, n=9, heads=3, dim=32):
    x = rng.standard_normal((n, heads, dim)) * rng.uniform(0.01, 20, (n, heads, 1))
    x[0, 0] = 0.0  # an all-zero (row, head): scale 0, codes 0
    return x


@pytest.mark.parametrize("mode", ["int8", "int4"])
@pytest.mark.parametrize("src", ["f32", "f16"])
def test_quantize_matches_reference_and_bound(dev, rng, mode, src):
    skip_unless_f16(dev, why=QUANT_SCALES)
    x = _quant_case(rng).astype(np.float32 if src == "f32" else np.float16)
    qkv = kv_quantize(dev.tensor(x), mode)
    packed, scales = qkv.packed, qkv.scales
    assert (qkv.mode, qkv.head_dim) == (mode, x.shape[2])
    codes, want_scales = R.quantize(x.astype(np.float64), mode)
    np.testing.assert_array_equal(scales.numpy(), want_scales)
    got = R.unpack(packed.numpy(), mode)
    # x / scale in f32 may round differently from float64 right at a .5 tie: allow a rare off-by-one code.
    assert np.abs(got - codes).max() <= 1 and (got != codes).mean() < 1e-3
    # Bound: the scale is max|x|/QMAX rounded up to f16, so |x|/scale <= QMAX (no clamping) and rounding to the
    # nearest integer code leaves |x - q*scale| <= scale/2 (a tiny slack for the f32 quotient).
    err = np.abs(R.dequantize(got, scales.numpy()) - x.astype(np.float64))
    assert np.all(err <= scales.numpy().astype(np.float64)[..., None] * (0.5 + 1e-6) + 1e-30)


@pytest.mark.parametrize("mode", ["int8", "int4"])
@pytest.mark.parametrize("size", [3e-3, 2e-4, 1e-5])
def test_quantize_rows_whose_scale_is_an_f16_subnormal(dev, rng, mode, size):
    """Small rows (max |x| below 127 or 7 x f16's smallest normal, 6.1e-5: 7.8e-3 for int8, 4.3e-4 for int4) have
    an f16 scale that is an f16 subnormal. A device may flush subnormals (Vulkan allows it for f16 as for f32), which
    would store a scale of 0 and read such rows back as zeros; each must come back within half its scale of float64,
    with the reference's scale."""
    skip_unless_f16(dev, why=QUANT_SCALES)
    x = (rng.standard_normal((4, 2, 16)) * size).astype(np.float32)
    qkv = kv_quantize(dev.tensor(x), mode)
    codes, want_scales = R.quantize(x.astype(np.float64), mode)
    np.testing.assert_array_equal(qkv.scales.numpy(), want_scales)
    assert np.abs(R.unpack(qkv.packed.numpy(), mode) - codes).max() <= 1
    back = kv_dequantize(qkv, dtype="f32").numpy().astype(np.float64)
    err = np.abs(back - x.astype(np.float64))
    assert np.all(err <= want_scales.astype(np.float64)[..., None] * (0.5 + 1e-3) + 1e-30), err.max()
    assert np.abs(back).max() > 0.5 * np.abs(x).max()


@pytest.mark.parametrize("mode,reach", [("int8", 127 * 65504), ("int4", 7 * 65504)])
def test_quantize_nan_and_values_past_the_formats_reach(dev, rng, mode, reach):
    """A NaN made a finite code (max() dropped it): its (row, head) now reads back NaN, the others as they were.
    A value past the format's reach (its largest code x f16's largest scale) made the scale inf and the whole
    (row, head) NaN, silently: the scale is held at 65504 (the values clip) and it is reported."""
    skip_unless_f16(dev, why=QUANT_SCALES)
    x = rng.standard_normal((3, 2, 16)).astype(np.float32)
    x[1, 0, 4] = np.nan
    qkv = kv_quantize(dev.tensor(x), mode)
    back = kv_dequantize(qkv, dtype="f32").numpy()
    assert np.isnan(back[1, 0]).all() and not np.isnan(np.delete(back.reshape(6, 16), 2, axis=0)).any()
    big = x.copy()
    big[1, 0] = 1.0
    big[1, 0, 4] = 2.0 * reach
    qkv = kv_quantize(dev.tensor(big), mode)
    with pytest.raises(wg.GpuValueError, match=rf"kv_append_quantized: the largest \|value\| of a \(row, kv head\) "
                                               rf"quantized .* was {2 * reach}; it must be <= {reach}"):
        dev.check_errors()
    back = kv_dequantize(qkv, dtype="f32").numpy()
    assert np.isfinite(back).all() and back[1, 0, 4] == pytest.approx(reach)   # clipped to the reach


@pytest.mark.parametrize("mode", ["int8", "int4"])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_dequantize_reference_data(dev, rng, mode, dtype):
    skip_unless_f16(dev, why=QUANT_SCALES)
    codes, scales = R.quantize(_quant_case(rng), mode)
    qkv = QuantizedKV(dev.tensor(R.pack(codes, mode)), dev.tensor(scales), mode, codes.shape[2])
    out = kv_dequantize(qkv, dtype=dtype).numpy()
    want = R.dequantize(codes, scales)
    rtol = 1e-6 if dtype == "f32" else 2**-11
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=rtol, atol=1e-30)



@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_dequantize_to_f16_keeps_f16s_largest_finite(dev, mode):
    """An f16 row holding -65504 quantizes to a code times a scale just past f16's range (int8: scale 516, -127 x 516
    = -65532; int4: scale 9360, -7 x 9360 = -65520), within scale / 2 of -65504 as promised, but
    kv_dequantize(dtype="f16") rounded it to -inf. It is now clamped to f16's range: -65504, the nearest f16."""
    skip_unless_f16(dev, why=QUANT_SCALES)
    vpw = 4 if mode == "int8" else 8
    x = np.resize(np.array([20736.0, 49312.0, 19824.0, -65504.0], np.float16), (1, 1, vpw))
    qkv = kv_quantize(dev.tensor(x), mode)
    out16 = kv_dequantize(qkv, dtype="f16").numpy().astype(np.float64)
    out32 = kv_dequantize(qkv, dtype="f32").numpy().astype(np.float64)
    assert np.all(np.isfinite(out16)) and np.all(out16[..., 3::4] == -65504.0), out16
    assert np.all(np.abs(out32 - x) <= qkv.scales.numpy().astype(np.float64)[..., None] / 2), out32
    assert np.all(out32[..., 3::4] < -65504.0)   # f32 keeps the code times the scale

def test_append_quantized_paged(dev, rng):
    skip_unless_f16(dev, why=QUANT_SCALES)
    mode, page_size, table = "int4", 2, np.array([1, 3, 0, 2], np.uint32)
    caps = [(dev.tensor(np.zeros((8, 2, 2), np.uint32)), dev.tensor(np.zeros((8, 2), np.float16))) for _ in range(2)]
    pt = dev.tensor(table)
    logical = np.zeros((8, 2, 16))
    for pos, n in ((0, 3), (3, 4)):
        k = rng.standard_normal((n, 2, 16)).astype(np.float16)
        kv_append_quantized(caps, dev.tensor(k), dev.tensor(k), pos, mode=mode, layout="paged", page_table=pt,
                            page_size=page_size)
        logical[pos:pos + n] = k
    rows = R.paged_rows(7, page_size, table)
    codes, scales = R.quantize(logical[:7], mode)
    np.testing.assert_array_equal(caps[0][1].numpy()[rows], scales)
    assert np.abs(R.unpack(caps[0][0].numpy()[rows], mode) - codes).max() <= 1


def test_quantize_shape_errors(dev, rng):
    x = dev.tensor(rng.standard_normal((4, 2, 12)).astype(np.float32))
    with pytest.raises(wg.ShapeError, match="head_dim 12 must be a multiple of 8 for int4"):
        kv_quantize(x, "int4")
    with pytest.raises(wg.ArgumentError, match="mode='int2' must be one of 'int8', 'int4'"):
        kv_quantize(x, "int2")
    skip_unless_f16(dev, why=QUANT_SCALES)   # the argument checks above run before any f16 work
    q8 = kv_quantize(x, "int8")
    packed, scales = q8.packed, q8.scales
    with pytest.raises(wg.ShapeError, match=r"scales must be f16 \(4, 2\).*got f16 \(4, 3\)"):
        QuantizedKV(packed, dev.tensor(np.zeros((4, 3), np.float16)), "int8", 12)
    with pytest.raises(wg.DtypeError, match=r"scales must be f16 \(4, 2\).*got f32 \(4, 2\)"):   # dtype: DtypeError
        QuantizedKV(packed, dev.tensor(np.zeros((4, 2), np.float32)), "int8", 12)
    with pytest.raises(wg.ShapeError, match=r"scales must be f16 \(3, 2\).*got f16 \(4, 2\)"):
        QuantizedKV(dev.tensor(np.zeros((3, 2, 3), np.uint32)), scales, "int8", 12)
    with pytest.raises(wg.ShapeError, match=r"packed int8 data must be u32"):
        pair = [(dev.tensor(np.zeros((8, 2, 2), np.uint32)), dev.tensor(np.zeros((8, 2), np.float16))) for _ in "kv"]
        kv_append_quantized(pair, x, x, 0, mode="int8")


def test_quantized_kv_carries_its_mode(dev, rng):
    """int4 data can no longer be read as int8 (it used to give a [n, Hkv, D/2] tensor of wrong values)."""
    skip_unless_f16(dev, why=QUANT_SCALES)
    x = rng.standard_normal((3, 2, 16)).astype(np.float32)
    q4 = kv_quantize(dev.tensor(x), "int4")
    back = kv_dequantize(q4).numpy()
    assert back.shape == x.shape
    assert np.all(np.abs(back - x) <= q4.scales.numpy().astype(np.float32)[..., None] * 0.5 + 1e-6)
    with pytest.raises(wg.ShapeError, match=r"kv_dequantize: qkv must be a QuantizedKV"):
        kv_dequantize(q4.packed, q4.scales)
    with pytest.raises(wg.ShapeError, match=r"packed int8 data must be u32 \(3, 2, 4\) for rows \(3, 2, 16\) \(n, kv_heads, head_dim\), got u32 \(3, 2, 2\)"):
        QuantizedKV(q4.packed, q4.scales, "int8", 16)
    with pytest.raises(wg.ShapeError, match=r"packed int8 data must be u32"):  # the tiered path checks the mode too
        hot = dev.tensor(np.zeros((4, 2, 16), np.float16))
        wg.ops.tiered_quant_attention(dev.tensor(x[:1, :2]), hot, hot, q4.packed, q4.packed, q4.scales, q4.scales,
                                      mode="int8", kv_len=7, hot_window=4, causal=True)


def test_append_refuses_one_buffer_as_both_caches(dev, rng):
    """k and v rows go to the same rows of their caches: one buffer given as both (or a view of the other) would
    have the v write overwrite the k rows just written (it did, silently). Refused, naming both, before any write;
    in a graph too (two state values over one base)."""
    dt = f16_or_f32(dev)
    kc, _ = _cache(dev, 8, dtype=dt)
    k, v = dev.tensor(_rows(rng, 3, dtype=dt)), dev.tensor(_rows(rng, 3, dtype=dt))
    for other in (kc, kc.reshape(8, 16).reshape(8, 2, 8)):
        with pytest.raises(wg.AliasingError, match=r"kv_append: the k cache and the v cache are one buffer"):
            kv_append((kc, other), k, v, 0)
    np.testing.assert_array_equal(kc.numpy(), 0)
    if dev.caps.has_f16:   # quantized caches store f16 scales
        _refuses_one_buffer_as_both_quantized_scales(dev, rng)
    g = wg.Graph("one_cache")   # a graph is built without the device: f16 states on any
    cache = g.state("cache", (8, 2, 8), "f16")
    with pytest.raises(wg.AliasingError, match=r"the k cache and the v cache are one buffer"):
        kv_append((cache, cache.reshape(8, 16).reshape(8, 2, 8)), g.input("k", (3, 2, 8), "f16"),
                  g.input("v", (3, 2, 8), "f16"), 0)


def _refuses_one_buffer_as_both_quantized_scales(dev, rng):
    packed = dev.tensor(np.zeros((8, 2, 2), np.uint32))
    scales = [dev.tensor(np.zeros((8, 2), np.float16)) for _ in range(2)]
    with pytest.raises(wg.AliasingError, match=r"kv_append_quantized: the k scales and the v scales are one buffer"):
        kv_append_quantized(((packed, scales[0]), (dev.tensor(np.zeros((8, 2, 2), np.uint32)), scales[0])),
                            dev.tensor(_rows(rng, 3, dim=16)), dev.tensor(_rows(rng, 3, dim=16)), 0, mode="int4")


def test_dequantize_names_what_it_was_given(dev):
    """kv_dequantize(qkv, "int8") (a QuantizedKV and the old mode argument) said 'qkv must be a QuantizedKV ...,
    got QuantizedKV': it now names the extra arguments; the old (packed, scales, mode) call names the Tensor and them."""
    skip_unless_f16(dev, why=QUANT_SCALES)
    qkv = kv_quantize(dev.tensor(np.ones((2, 1, 8), np.float32)), "int4")
    with pytest.raises(wg.ShapeError, match=r"alone, got QuantizedKV and 1 more positional argument\(s\)"):
        kv_dequantize(qkv, "int8")
    with pytest.raises(wg.ShapeError, match=r"alone, got Tensor and 2 more positional"):
        kv_dequantize(qkv.packed, qkv.scales, "int4")


def test_dequantize_dtype_error_spells_only_what_it_takes(dev):
    """kv_dequantize(dtype="bf16") is refused (f32 or f16 out); its message listed 'bfloat16' among the spellings it
    takes. It now spells one of its own choices."""
    skip_unless_f16(dev, why=QUANT_SCALES)
    qkv = kv_quantize(dev.tensor(np.ones((2, 1, 8), np.float32)), "int4")
    with pytest.raises(wg.DtypeError, match=r"^kv_dequantize: dtype='bfloat16' must be one of 'f16', 'f32' \(or "
                                            r"numpy's or torch's spelling of one, such as 'float16', np.float16, "
                                            r"torch.float16\)$") as e:
        kv_dequantize(qkv, dtype="bfloat16")
    assert "bfloat16'," not in str(e.value) and "bfloat16)" not in str(e.value)


@pytest.mark.parametrize("mode", [None, "int8"])
def test_gpu_position_before_zero_is_reported(dev, rng, mode):
    """A GPU position plus a negative pos_offset below 0 (a decode step's kv_len - 1 with kv_len still 0) wrote
    that row nowhere and reported nothing: it was lost silently. It is outside the cache: reported and not written,
    the append's other rows written (whole caches against numpy). TieredKVCache's hot -> cold move of a row not there yet still skips silently."""
    if mode:
        skip_unless_f16(dev, why=QUANT_SCALES)
    dt = f16_or_f32(dev)
    pos = dev.tensor(np.array([1], np.uint32))
    k = _rows(rng, 3, dim=8, dtype=dt)
    if mode is None:
        cache = _cache(dev, 6, dtype=dt)
        kv_append(cache, dev.tensor(k), dev.tensor(k), pos, pos_offset=-2, layout="ring")
        bufs = cache
    else:
        cache = [(dev.tensor(np.zeros((6, 2, 2), np.uint32)), dev.tensor(np.zeros((6, 2), np.float16))) for _ in "kv"]
        kv_append_quantized(cache, dev.tensor(k), dev.tensor(k), pos, pos_offset=-2, mode=mode)
        bufs = [b for pair in cache for b in pair]
    with pytest.raises(wg.GpuValueError, match=r"the position of a row .* was 4294967295; it must be < 6"):
        dev.check_errors()
    want = np.zeros((6, 2, 8))
    want[:2] = k[1:]   # positions -1, 0, 1: rows 0 and 1 written, position -1 nowhere (not ring row 5)
    if mode is None:
        for b in bufs:
            np.testing.assert_array_equal(b.numpy(), want)
    else:
        codes, scales = R.quantize(want, mode)
        for packed, sc in cache:
            np.testing.assert_array_equal(sc.numpy(), scales)
            assert np.abs(R.unpack(packed.numpy(), mode) - codes).max() <= 1
    if not dev.caps.has_f16:
        return   # the rest is the tiered cache's, whose hot ring is f16
    from wgraph.ops.tiered_cache import TieredKVCache
    tc = TieredKVCache(dev, kv_heads=2, head_dim=8, hot_window=2, cold_capacity=4, quant=mode)
    kv_len = dev.tensor(np.array([1], np.uint32))
    tc.append(dev.tensor(k[:1]), dev.tensor(k[:1]), kv_len=kv_len)
    dev.check_errors()
    np.testing.assert_array_equal(tc.hot_k.numpy()[0], k[0])


def _append_graph(quantized: bool, dtype="f16"):
    """kv_append (or kv_append_quantized, int8) of one row at position 0 into 6-row caches, as a graph."""
    g = wg.Graph("append")
    k_new, v_new = g.input("k_new", (1, 2, 8), dtype), g.input("v_new", (1, 2, 8), dtype)
    if quantized:
        cache = tuple((g.state(f"{n}_packed", (6, 2, 2), "u32"), g.state(f"{n}_scales", (6, 2), "f16")) for n in "kv")
        kv_append_quantized(cache, k_new, v_new, 0, mode="int8")
    else:
        kv_append((g.state("k_cache", (6, 2, 8), dtype), g.state("v_cache", (6, 2, 8), dtype)), k_new, v_new, 0)
    return g


def _check_rows(prog, quantized: bool, want: dict):
    """Each cache's rows against the float64 reference: `want` {"k": rows [6, 2, 8], "v": ...}."""
    for n, rows in want.items():
        if not quantized:
            np.testing.assert_array_equal(prog.state(f"{n}_cache").numpy(), rows, err_msg=f"{n} cache")
            continue
        codes, scales = R.quantize(rows, "int8")
        np.testing.assert_array_equal(prog.state(f"{n}_scales").numpy(), scales, err_msg=f"{n} scales")
        assert np.abs(R.unpack(prog.state(f"{n}_packed").numpy(), "int8") - codes).max() <= 1, f"{n} codes"


@pytest.mark.parametrize("quantized", [False, True])
def test_append_in_a_graph_is_one_node_that_update_moves_whole(dev, rng, quantized):
    """kv_append was two graph nodes (kv_write for k, kv_write for v), each with its own params: Program.update of
    the first one's pos moved only the k rows, and the v rows kept landing at the old position (k at row 3, v at
    row 0), silently. It is one node whose params place both writes; the graph file round trip keeps it so."""
    if quantized:
        skip_unless_f16(dev, why=QUANT_SCALES)
    dt = f16_or_f32(dev)
    g = _append_graph(quantized, wg.dtypes.dtype_name_of(dt))
    g2 = wg.Graph.from_json(g.to_json())
    for graph in (g, g2):
        prog = graph.compile(dev)
        appends = [n for n in prog.order if graph.node(n).op.startswith("kv_")]
        k1, v1, k2, v2 = (_rows(rng, 1, dtype=dt) for _ in range(4))
        want = {"k": np.zeros((6, 2, 8)), "v": np.zeros((6, 2, 8))}
        prog.run(k_new=k1, v_new=v1)
        want["k"][0], want["v"][0] = k1[0], v1[0]
        prog.update(appends[0], attrs.evolve(prog.params[appends[0]], pos=3))
        prog.run(k_new=k2, v_new=v2)
        want["k"][3], want["v"][3] = k2[0], v2[0]
        _check_rows(prog, quantized, want)
        assert [graph.node(n).op for n in appends] == ["kv_append_quantized" if quantized else "kv_append"]


def test_a_file_with_the_retired_kv_write_nodes_says_what_replaced_them():
    """A graph file of the older two-node kv_append (op kv_write, one per cache) is refused naming the op and what
    replaced it, not read as two nodes that a file or Program.update can move apart."""
    data = json.loads(_append_graph(False).to_json())
    node = next(n for n in data["nodes"] if n["op"] == "kv_append")
    node["op"] = "kv_write"
    with pytest.raises(wg.GraphError, match=r"op 'kv_write' is no longer read: kv_append \(and kv_append_quantized\) "
                                            r"is one node"):
        wg.Graph.from_json(json.dumps(data))


def test_update_to_a_negative_ring_position_is_refused(dev, rng):
    """A ring's host position was checked for the ring's size alone: Program.update(pos=-1) (or a graph file) of a
    kv_append into a ring passed, and the run wrote row 1 of the append at position 0 and skipped row 0, reported
    only on the GPU. A negative int position is a LimitError in every layout; the program keeps its params."""
    g = wg.Graph("ring")
    kc, vc = g.state("kc", (4, 1, 4)), g.state("vc", (4, 1, 4))
    k = g.input("k", (2, 1, 4), "f32")
    kv_append((kc, vc), k, k, 0, layout="ring")
    prog = g.compile(dev)
    (node,) = [n for n in prog.order if n.startswith("kv_append")]
    with pytest.raises(wg.LimitError, match=r"kv_append: position -1 \(pos \+ pos_offset\) is negative"):
        prog.update(node, attrs.evolve(prog.params[node], pos=-1))
    rows = rng.standard_normal((2, 1, 4)).astype(np.float32)
    prog.run(k=rows)   # still at position 0
    want = np.zeros((4, 1, 4), np.float32)
    want[:2] = rows
    np.testing.assert_array_equal(prog.state("kc").numpy(), want)
    prog.update(node, attrs.evolve(prog.params[node], pos=7))   # 7 and 8: rows 3 and 0 of the ring
    prog.run(k=rows)
    want[3], want[0] = rows
    np.testing.assert_array_equal(prog.state("kc").numpy(), want)


def test_a_page_table_mapping_past_2_32_positions_appends(dev, rng):
    """A page table of 2^20 + 2 pages of 4096 rows maps 2^32 + 8192 positions: kv_append at position 5 (int or GPU)
    and rope_kv_append raised 'uniform field KVAppendParams.capacity=4294975488 is outside u32' (the capacity
    field, u32, took the product). Positions stay below 2^31, so the field holds at most 2^31: the rows land at
    page_table[t // 4096] * 4096 + t % 4096 and nothing else changes."""
    page = 4096
    table = np.zeros(2**20 + 2, np.uint32)
    table[0] = 1                                      # logical page 0 is pool page 1
    pt = dev.tensor(table)
    init = rng.standard_normal((2 * page, 1, 2)).astype(np.float32)
    kc, vc = dev.tensor(init), dev.tensor(init + 1)
    k = rng.standard_normal((2, 1, 2)).astype(np.float32)
    kv_append((kc, vc), dev.tensor(k), dev.tensor(k), 5, layout="paged", page_table=pt, page_size=page)
    kv_append((kc, vc), dev.tensor(k[::-1].copy()), dev.tensor(k[::-1].copy()), dev.tensor(np.array([9], np.uint32)),
              layout="paged", page_table=pt, page_size=page)
    want_k, want_v = init.copy(), init + 1
    want_k[page + 5:page + 7] = want_v[page + 5:page + 7] = k
    want_k[page + 9:page + 11] = want_v[page + 9:page + 11] = k[::-1]
    np.testing.assert_array_equal(kc.numpy(), want_k)
    np.testing.assert_array_equal(vc.numpy(), want_v)
    cos, sin = wg.ops.rope_tables(16, 2)
    qkv = rng.standard_normal((1, 6)).astype(np.float32)   # one q, one k, one v head of 2
    q = wg.ops.rope_kv_append(dev.tensor(qkv), dev.tensor(cos), dev.tensor(sin), (kc, vc), 12, q_heads=1,
                              layout="paged", page_table=pt, page_size=page).numpy()
    heads = qkv.astype(np.float64).reshape(1, 3, 2)
    np.testing.assert_allclose(q[0], R.rope_rows(heads[:, :1], cos, sin, np.array([12]))[0], atol=1e-6)
    want_k[page + 12] = R.rope_rows(heads[:, 1:2], cos, sin, np.array([12]))[0]
    want_v[page + 12] = heads[0, 2:3]
    np.testing.assert_allclose(kc.numpy(), want_k, atol=1e-6)
    np.testing.assert_array_equal(vc.numpy(), want_v)


def test_append_paged_page_id_past_an_odd_f16_cache_is_reported(dev):
    """An f16 cache of 3 rows of one value (kv_heads 1, head_dim 1) is 6 bytes, bound as 8: the kernel counted its
    pages from arrayLength, padding included, so page id 3 passed for a page of the cache. Into a prefix view of a
    4-row cache it overwrote row 3, past the view (read [1, 2, 3, 9]); into a 3-row cache it wrote the padding; no
    error either way. The pages come from the host's shape now: page id 3 is reported and nothing is written."""
    if not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    big_k = dev.tensor(np.array([1, 2, 3, 4], np.float16).reshape(4, 1, 1))
    big_v = dev.tensor(np.array([1, 2, 3, 4], np.float16).reshape(4, 1, 1))
    new = dev.tensor(np.full((1, 1, 1), 9, np.float16))
    table = dev.tensor(np.array([0, 1, 3], np.uint32))
    kv_append((big_k.prefix(3), big_v.prefix(3)), new, new, 2, layout="paged", page_table=table, page_size=1)
    with pytest.raises(wg.GpuValueError, match=r"kv_append: a GPU page_table page id was 3; it must be < 3"):
        dev.check_errors()
    np.testing.assert_array_equal(big_k.numpy().ravel(), [1, 2, 3, 4])
    np.testing.assert_array_equal(big_v.numpy().ravel(), [1, 2, 3, 4])


def test_append_of_new_rows_that_are_the_k_cache_is_refused(dev):
    """kv_append is two dispatches, k then v; each alone binds no buffer twice, so v_new a view of the k cache
    passed: the v dispatch copied the row the k dispatch had just written (v row 0 read [-1, -1], not the [0, 1]
    given). Refused now, before any GPU work, naming the arguments; one tensor given as both k_new and v_new (read
    twice, written never) still appends."""
    k0 = np.arange(8, dtype=np.float32).reshape(4, 1, 2)
    kc, vc = dev.tensor(k0), dev.tensor(k0 + 100)
    new = dev.tensor(np.full((1, 1, 2), -1, np.float32))
    before = dev.stats.snapshot()
    for v_new in (kc.prefix(1), kc.reshape(8).reshape(4, 1, 2).prefix(1)):
        with pytest.raises(wg.AliasingError, match=r"^kv_append: v_new and k_cache are one buffer .*dispatch 0 "
                                                   r"\(kv_append\) writes and dispatch 1 \(kv_append\) binds again"):
            kv_append((kc, vc), new, v_new, 0)
    assert dev.stats.since(before).dispatches == 0
    np.testing.assert_array_equal(kc.numpy(), k0)
    np.testing.assert_array_equal(vc.numpy(), k0 + 100)
    kv_append((kc, vc), new, new, 1)
    want = k0.copy()
    want[1] = -1
    np.testing.assert_array_equal(kc.numpy(), want)
    np.testing.assert_array_equal(vc.numpy()[1], [[-1, -1]])
