"""bf16 as a storage dtype: host rounding (nearest even, NaN kept, overflow refused) against a reference that
picks the nearer of the two neighbouring bf16 values; tensors of odd sizes; the bf16 kernels of elementwise ops,
rmsnorm, embedding and kv_append against float64 numpy on bf16 inputs."""

import warnings

import numpy as np
import pytest

import wgraph as wg
from wgraph.dtypes import BF16_BITS, from_bf16, to_bf16


def nearest_bf16(x: np.ndarray) -> np.ndarray:
    """The bf16 value nearest each f32 (ties to the even bit pattern), by comparing the two bf16 neighbours in
    float64: the truncated pattern and the next one away from zero."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    lo = (u >> 16).astype(np.uint32)
    hi = lo + 1
    with np.errstate(invalid="ignore"):  # NaN inputs
        v_lo = (lo << 16).view(np.float32).astype(np.float64)
        v_hi = (hi << 16).view(np.float32).astype(np.float64)  # may be inf past the largest finite
        xd = x.astype(np.float64)
        d_lo, d_hi = np.abs(xd - v_lo), np.abs(v_hi - xd)
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (lo % 2 == 1))
    out = np.where(pick_hi, v_hi, v_lo)
    return np.where(np.isnan(xd), np.nan, np.where(np.isinf(xd), xd, out))


def bf16_values(rng, shape, scale=1.0) -> np.ndarray:
    """float32 data whose values are exactly bf16."""
    return from_bf16(to_bf16(rng.standard_normal(shape).astype(np.float32) * scale))


def test_host_rounding_matches_the_nearest_bf16(rng):
    x = np.concatenate([
        rng.standard_normal(20000).astype(np.float32) * 50,
        np.geomspace(1e-41, 1e38, 2000).astype(np.float32),          # subnormals up to near the top
        ((np.arange(1000, dtype=np.uint32) << 16) | 0x8000).view(np.float32),  # exact ties
        np.array([0.0, -0.0, np.inf, -np.inf, 3.3895313e38, -1.0 - 2**-8], np.float32),
    ])
    got = from_bf16(to_bf16(x)).astype(np.float64)
    want = nearest_bf16(x)
    finite = np.isfinite(want)
    assert np.array_equal(got[finite], want[finite]) and np.array_equal(got[~finite], want[~finite])
    # float64 input rounds straight to bf16 (no double rounding through f32): just above a tie goes up
    above_tie = 1.0 + 2.0**-8 + 2.0**-30
    assert from_bf16(to_bf16(np.array([above_tie])))[0] == 1.0 + 2.0**-7
    assert from_bf16(to_bf16(np.array([above_tie], np.float32)))[0] == 1.0  # f32 already rounded it to the tie
    nan = to_bf16(np.array([np.nan, -np.nan, np.float32(np.uint32(0x7F800001).view(np.float32))], np.float32))
    assert np.isnan(from_bf16(nan)).all()  # a NaN whose payload is only in the low half stays NaN, not inf
    with pytest.raises(wg.DtypeError, match=r"to_bf16: 3\.39999.*e\+38 is beyond bfloat16.s range"):
        to_bf16(np.array([1.0, 3.4e38], np.float32))


def nearest_bf16_of_int(v: int) -> float:
    """The bf16 nearest an integer, from the definition in Python integers: keep the top 8 significant bits,
    round the rest to nearest, ties to an even 8th bit."""
    m = abs(v)
    s = max(m.bit_length() - 8, 0)
    q, r = divmod(m, 1 << s)
    if s and (2 * r > 1 << s or (2 * r == 1 << s and q % 2)):
        q += 1
    return float(q << s) * (-1.0 if v < 0 else 1.0)


def test_host_rounding_of_wide_ints_and_long_double_rounds_once(rng):
    """int64 / uint64 went through float64 first, long double through float32: 2^53 + 2^45 + 1 (just above a bf16
    tie) became the tie 2^53 + 2^45 in float64, then went down to 2^53 (ties to even); 1 + 2^-8 + 2^-40 as a long
    double became the tie 1 + 2^-8 in f32, then 1.0. Each now rounds once, to 2^53 + 2^46 and 1 + 2^-7."""
    assert from_bf16(to_bf16(np.array([2**53 + 2**45 + 1], np.int64)))[0] == 2.0**53 + 2.0**46
    assert from_bf16(to_bf16(np.array([2**63 + 2**55 + 1], np.uint64)))[0] == 2.0**63 + 2.0**56
    assert from_bf16(to_bf16(np.array([1 + 2**-8 + 2**-40], np.longdouble)))[0] == 1 + 2**-7
    exps = rng.integers(8, 62, 2000)
    near_ties = [(int(b) << int(e - 7)) + (1 << int(e - 8)) + int(d)  # b * 2^(e-7) + half an ulp + d
                 for b, e, d in zip(rng.integers(128, 256, 2000), exps, rng.integers(-2, 3, 2000))]
    ints = near_ties + [int(v) for v in rng.integers(-2**63, 2**63 - 1, 2000, dtype=np.int64)] + [-2**63, 2**63 - 1]
    signed = np.array([v if i % 2 or v == -2**63 else -v for i, v in enumerate(ints)], np.int64)
    unsigned = np.array([abs(v) * 2 + 1 for v in near_ties] + [2**64 - 1, 2**64 - 2**55 - 1], np.uint64)
    for a in (signed, unsigned):
        want = np.array([nearest_bf16_of_int(int(v)) for v in a.tolist()])
        np.testing.assert_array_equal(from_bf16(to_bf16(a)).astype(np.float64), want)


def test_host_rounding_warns_of_nothing(dev):
    """to_bf16 of a 0-d int64 / uint64 0 (dev.tensor(0, "bf16"): Python's 0 is a 0-d int64) warned 'overflow
    encountered in scalar add' (the two's complement negation, computed as numpy scalars for 0-d data), and a float64
    or long double near its dtype's max warned 'overflow encountered in multiply' before the DtypeError: with warnings
    as errors (python -W error) both were a bare RuntimeWarning. Neither warns now; the bits are the values'."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for a, bits in ((np.array(0, np.int64), 0x0000), (np.array(0, np.uint64), 0x0000),
                        (np.array(-3, np.int64), 0xC040), (np.array([0, -1], np.int64), [0x0000, 0xBF80])):
            got = to_bf16(a)
            assert got.shape == a.shape and np.array_equal(got.view(np.uint16), bits)
        assert dev.tensor(0, "bf16").numpy().view(np.uint32) == 0
        for big in (np.array([np.finfo(np.float64).max]), np.array(-np.finfo(np.float64).max),
                    np.array([np.finfo(np.longdouble).max])):
            with pytest.raises(wg.DtypeError, match=r"to_bf16: .* is beyond bfloat16's range"):
                to_bf16(big)


def test_tensors_round_trip_and_writes_need_bf16_data(dev, rng):
    x = rng.standard_normal(7).astype(np.float32)  # odd: the last u32 word holds one element
    t = dev.tensor(x, "bf16")
    assert (t.dtype, t.nbytes) == ("bf16", 14)
    back = t.numpy()
    assert back.dtype == np.float32 and np.array_equal(back, nearest_bf16(x).astype(np.float32))
    with pytest.raises(wg.DtypeError, match=r"expects bf16 .* convert it explicitly \(wgraph\.dtypes\.to_bf16"):
        dev.write(t, x)
    dev.write(t, to_bf16(2 * x))
    assert np.array_equal(t.numpy(), nearest_bf16(2 * x).astype(np.float32))
    assert dev.tensor(to_bf16(x)).dtype == "bf16"  # bf16 bits keep their dtype without dtype=
    # uint16 is what bf16 bits look like out of torch (x.view(torch.uint16)) or a file: taken as numbers, 0x3F80
    # (1.0) became 16256.0; the caller says which it is
    raw = np.array([0x3F80, 0xC000, 300], np.uint16)
    with pytest.raises(wg.DtypeError, match=r"dev.tensor: a uint16 array is ambiguous as bf16 data: .*"
                                            r"array.view\(wgraph.dtypes.BF16_BITS\).*array.astype\(np.float32\)"):
        dev.tensor(raw, "bf16")
    assert np.array_equal(dev.tensor(raw.view(BF16_BITS)).numpy(), [1.0, -2.0, float(np.uint32(300 << 16).view(np.float32))])
    assert np.array_equal(dev.tensor(raw.astype(np.float32), "bf16").numpy(), [16256.0, 49152.0, 300.0])
    with pytest.raises(wg.DtypeError, match=r"dev.tensor: 1e\+39 is beyond bfloat16's range"):
        dev.tensor(np.array([1e39]), "bf16")
    assert to_bf16(x).dtype == BF16_BITS


ULP8 = 2.0**-8  # half a bf16 ulp, relative: the one rounding of an f32 result to bf16


def assert_bf16_close(got, exact, f32_slack=1e-6):
    """One rounding to bf16 of an f32 result within f32_slack (relative) of exact."""
    got, exact = np.asarray(got, np.float64), np.asarray(exact, np.float64)
    assert np.all(np.abs(got - exact) <= (ULP8 + f32_slack) * np.abs(exact) + 1e-38), \
        float(np.max(np.abs(got - exact) / (np.abs(exact) + 1e-38)))


@pytest.mark.parametrize("n", [1, 6, 7, 1001])
def test_elementwise_bf16(dev, rng, n):
    x, y = bf16_values(rng, n, 3), bf16_values(rng, n)
    xt, yt = dev.tensor(to_bf16(x)), dev.tensor(to_bf16(y))
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    cases = [
        (wg.ops.silu(xt), x64 / (1 + np.exp(-x64))),
        (wg.ops.scale(xt, 0.3), x64 * np.float32(0.3)),
        (wg.ops.softcap(xt, 2.0), 2.0 * np.tanh(x64 / 2.0)),
        (wg.ops.add(xt, yt), x64 + y64),
        (wg.ops.mul(xt, yt), x64 * y64),
    ]
    for got, exact in cases:
        assert got.dtype == "bf16" and got.shape == (n,)
        assert_bf16_close(got.numpy(), exact, 1e-6)


def rne_bits(x) -> np.ndarray:
    """f32 values as bf16 bit patterns by the bit rule: add 0x7FFF plus the kept lowest bit, shift (NaN aside)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def test_elementwise_bf16_add_mul_are_the_rounded_f32_result_bit_for_bit(dev, rng):
    """Every bf16 bit pattern (zeros of both signs, infinities, NaNs, the largest finite) against random ones: the f32
    result (a product of two bf16 is exact in f32, a sum numpy's f32 rounding of the exact one) rounded once to the
    nearest-even bf16, bit for bit. Subnormal inputs and results are left out (WGSL may flush them); a NaN must stay
    NaN (its payload is the GPU's)."""
    a_bits = np.arange(1 << 16, dtype=np.uint16)
    b_bits = rng.permutation(a_bits)
    a, b = from_bf16(a_bits), from_bf16(b_bits)
    at, bt = dev.tensor(a_bits.view(BF16_BITS)), dev.tensor(b_bits.view(BF16_BITS))
    tiny = np.float32(2.0**-126)
    with np.errstate(over="ignore", invalid="ignore"):  # inf - inf, 0 * inf, past f32's range: the cases wanted
        cases = [(wg.ops.add(at, bt).numpy(), a.astype(np.float64) + b),
                 (wg.ops.mul(at, bt).numpy(), a.astype(np.float64) * b)]
        cases = [(got, exact, exact.astype(np.float32)) for got, exact in cases]
    for got, exact, exact32 in cases:
        keep = ~np.isnan(exact) & ~((np.abs(a) < tiny) & (a != 0)) & ~((np.abs(b) < tiny) & (b != 0)) \
            & ~((np.abs(exact32) < tiny) & (exact32 != 0))
        got_bits = got.view(np.uint32) >> 16
        np.testing.assert_array_equal(got_bits[keep], rne_bits(exact32[keep]))
        assert np.isnan(got[np.isnan(exact)]).all()


def test_elementwise_bf16_broadcast_and_halves(dev, rng):
    a, b = bf16_values(rng, (3, 5)), bf16_values(rng, 5)  # rows of 5: words straddle rows and b's wraps
    got = wg.ops.add(dev.tensor(to_bf16(a)), dev.tensor(to_bf16(b))).numpy()
    assert_bf16_close(got, a.astype(np.float64) + b)
    gu = bf16_values(rng, (3, 10), 2)  # halves of 5: odd offsets into the words
    g, u = gu[:, :5].astype(np.float64), gu[:, 5:].astype(np.float64)
    got = wg.ops.swiglu(dev.tensor(to_bf16(gu)))
    assert got.shape == (3, 5) and got.dtype == "bf16"
    assert_bf16_close(got.numpy(), g / (1 + np.exp(-g)) * u, 1e-6)
    got = wg.ops.geglu(dev.tensor(to_bf16(gu)), approximate="tanh").numpy()
    gelu_t = 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g**3)))
    assert_bf16_close(got, gelu_t * u, 1e-5)


def test_elementwise_bf16_into_an_odd_view_keeps_the_next_element(dev, rng):
    """out= the first row of a [2, 3] bf16 tensor (a prefix view): 3 elements end inside a u32 word whose high half
    is row 1's first element. The bf16 kernels write whole words and left that half 0 (row 1 read [0, 5, 6]); now the
    last word of an odd count keeps its high half, unary, binary and halves alike."""
    x, y = bf16_values(rng, (1, 3), 3), bf16_values(rng, (1, 3))
    gu = bf16_values(rng, (1, 6), 2)
    g, u = gu[:, :3].astype(np.float64), gu[:, 3:].astype(np.float64)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    rest = bf16_values(rng, (1, 3), 5)
    for call, exact in ((lambda out: wg.ops.scale(dev.tensor(to_bf16(x)), 0.3, out=out), x64 * np.float32(0.3)),
                        (lambda out: wg.ops.add(dev.tensor(to_bf16(x)), dev.tensor(to_bf16(y)), out=out), x64 + y64),
                        (lambda out: wg.ops.swiglu(dev.tensor(to_bf16(gu)), out=out), g / (1 + np.exp(-g)) * u)):
        big = dev.tensor(to_bf16(np.concatenate([np.zeros((1, 3), np.float32), rest])))
        call(big.prefix(1))
        got = big.numpy()
        np.testing.assert_array_equal(got[1], rest[0])
        assert_bf16_close(got[:1], exact, 1e-6)


def test_rope_bf16_into_an_odd_view_keeps_the_next_element(dev, rng):
    """rope of x [1, 1, 3] (head_dim 3, rotary_dim 2) into out= the first row of a [2, 1, 3] bf16 tensor: 3 elements
    end inside a u32 word whose high half is row 1's first element. The bf16 rope wrote whole words and left that
    half 0; it keeps it now, as the elementwise kernels do."""
    cos, sin = wg.ops.rope_tables(8, 2)
    x, rest = bf16_values(rng, (1, 1, 3), 2), bf16_values(rng, (1, 1, 3), 5)
    big = dev.tensor(to_bf16(np.concatenate([np.zeros((1, 1, 3), np.float32), rest])))
    wg.ops.rope(dev.tensor(to_bf16(x)), dev.tensor(cos), dev.tensor(sin), pos=3, rotary_dim=2, out=big.prefix(1))
    got = big.numpy()
    np.testing.assert_array_equal(got[1], rest[0])
    x64, c, s = x.astype(np.float64).ravel(), np.float64(cos[3, 0]), np.float64(sin[3, 0])
    exact = [x64[0] * c - x64[1] * s, x64[1] * c + x64[0] * s, x64[2]]
    assert_bf16_close(got[0].ravel(), exact, 1e-6)


def test_rmsnorm_bf16_per_head(dev, rng):
    x, w = bf16_values(rng, (3, 2, 8), 4), bf16_values(rng, 8)
    got = wg.ops.rmsnorm(dev.tensor(to_bf16(x)), dev.tensor(to_bf16(w)), eps=1e-6)
    x64 = x.astype(np.float64)
    exact = x64 / np.sqrt(np.mean(x64**2, -1, keepdims=True) + 1e-6) * w
    assert got.dtype == "bf16"
    assert_bf16_close(got.numpy(), exact, 1e-5)
    with pytest.raises(wg.ShapeError, match=r"rmsnorm: a bf16 row .* must be even; got x \(2, 3\)"):
        wg.ops.rmsnorm(dev.tensor(np.ones((2, 3), np.float32), "bf16"), dev.tensor(np.ones(3, np.float32), "bf16"))


def test_embedding_bf16(dev, rng):
    table = bf16_values(rng, (10, 6))
    tt = dev.tensor(to_bf16(table))
    ids = [3, 0, 9, 3, 5]
    rows = wg.ops.embedding(ids, tt)
    assert rows.dtype == "bf16" and np.array_equal(rows.numpy(), table[ids])  # a copy: exact
    wide = wg.ops.embedding(dev.tensor(np.array(ids, np.uint32)), tt, dtype="f32")
    assert wide.dtype == "f32" and np.array_equal(wide.numpy(), table[ids])  # widening: exact
    odd = dev.tensor(np.ones((4, 3), np.float32), "bf16")
    with pytest.raises(wg.ShapeError, match=r"embedding: bf16 rows .* hidden size must be even; got table \(4, 3\)"):
        wg.ops.embedding([1], odd)
    assert np.array_equal(wg.ops.embedding([1], odd, dtype="f32").numpy(), np.ones((1, 3), np.float32))


def test_kv_append_bf16(dev, rng):
    k, v = bf16_values(rng, (3, 2, 4)), bf16_values(rng, (3, 2, 4))
    kc, vc = dev.tensor(np.zeros((6, 2, 4), np.float32), "bf16"), dev.tensor(np.zeros((6, 2, 4), np.float32), "bf16")
    wg.ops.kv_append((kc, vc), dev.tensor(to_bf16(k)), dev.tensor(to_bf16(v)), 1)
    pos = dev.tensor(np.array([4], np.uint32))
    wg.ops.kv_append((kc, vc), dev.tensor(to_bf16(k[:2])), dev.tensor(to_bf16(v[:2])), pos)
    want_k, want_v = np.zeros((6, 2, 4), np.float32), np.zeros((6, 2, 4), np.float32)
    want_k[1:4], want_v[1:4], want_k[4:6], want_v[4:6] = k, v, k[:2], v[:2]
    assert np.array_equal(kc.numpy(), want_k) and np.array_equal(vc.numpy(), want_v)


def test_big_endian_uint16_is_refused_as_native_uint16_is():
    """A big-endian uint16 array (bf16 bits read from a file as '>u2') passed the uint16 refusal (an equality with
    native uint16) and was rounded as numbers: 0x3F80 (1.0 as bits) became bf16 16256.0. It is refused as uint16 is,
    naming the conversion that reads its bits right."""
    raw = np.array([0x3F80, 0xC000], ">u2")
    with pytest.raises(wg.DtypeError, match=r"to_bf16: a big-endian uint16 \(>u2\) array is ambiguous as bf16 data: "
                                            r".*array\.astype\(np\.uint16\)\.view\(wgraph\.dtypes\.BF16_BITS\)"):
        to_bf16(raw)
    assert from_bf16(raw.astype(np.uint16).view(BF16_BITS)).tolist() == [1.0, -2.0]  # the advice, followed


def test_bf16_bits_convert_to_the_dtype_asked_for(dev):
    """dev.tensor(bits, dtype="f32") of a BF16_BITS array (wgraph's own bf16 on the host) was refused as 'f32 data
    cannot come from an array of [('bf16', '<u2')]', though dtype= converts every other float array. Its values
    convert as any float data does: exactly to f32, checked for range into f16, checked for integers into i32."""
    bits = np.array([0x3FC0, 0xC000, 0x0001, 0x7F7F, 0xFF80], np.uint16)  # 1.5, -2, 2^-133, the largest, -inf
    values = (bits.astype(np.uint32) << 16).view(np.float32)             # the definition: the top half of an f32
    assert np.array_equal(dev.tensor(bits.view(BF16_BITS), "f32").numpy(), values)
    assert dev.tensor(bits[1:2].view(BF16_BITS), "i32").numpy().tolist() == [-2]
    with pytest.raises(wg.DtypeError, match=r"dev.tensor: 3.389531389\d*e\+38 is outside f16's range \+-65504"):
        dev.tensor(bits.view(BF16_BITS), "f16")
    with pytest.raises(wg.DtypeError, match=r"dev.tensor: 1.5 is not an integer; a i32 tensor holds integers"):
        dev.tensor(bits.view(BF16_BITS), "i32")


def test_bf16_bits_into_another_dtype_name_a_conversion_that_keeps_their_values(dev):
    """bf16 bit patterns written into an f32 (or i32) tensor were refused with 'got an array of [('bf16', '<u2')];
    convert it explicitly (array.astype(np.float32))', advice that, followed, reads the bits as numbers: 1.0 (0x3F80)
    became 16256.0. The message names from_bf16 now, and following it writes the values."""
    bits = to_bf16(np.array([1.0, -2.0], np.float32))
    t = dev.tensor([0.0, 0.0], "f32")
    with pytest.raises(wg.DtypeError, match=r"expects f32 \(float32\), got bfloat16 bit patterns \(BF16_BITS\); "
                                            r"convert it explicitly \(wgraph\.dtypes\.from_bf16\(array\)\)"):
        dev.write(t, bits)
    dev.write(t, from_bf16(bits))
    assert t.numpy().tolist() == [1.0, -2.0]
    with pytest.raises(wg.DtypeError, match=r"expects i32 \(int32\), got bfloat16 bit patterns \(BF16_BITS\); .*"
                                            r"\(wgraph\.dtypes\.from_bf16\(array\)\.astype\(np\.int32\)\)"):
        dev.write(dev.tensor(np.zeros(2, np.int32)), bits)
    with pytest.raises(wg.DtypeError, match=r"expects bf16 \(bfloat16 bit patterns\), got an array of float32"):
        dev.write(dev.tensor([0.0], "bf16"), np.ones(1, np.float32))
