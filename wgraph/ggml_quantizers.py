"""Quantizers from float32 weights into GGML blocks (ggml_blocks.quantize dispatches here): the K-quants
(Q2_K .. Q6_K), IQ4_NL / IQ4_XS and the IQ1 / IQ2 / IQ3 grid formats, which the `gguf` package cannot quantize,
each as llama.cpp's reference quantizer rounds (docs/quantized.md). Each takes float32 [rows, k] and returns the raw
block bytes (uint8 [rows, k / block_weights * block_bytes]); ggml_blocks.quantize checks the weights first and the
blocks' scales after."""

from __future__ import annotations

import numpy as np

# IQ4_NL's and IQ4_XS's 16 values (a nibble indexes them; docs/quantized.md)
IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.int8)


def format_grid(ggml_type: str) -> np.ndarray:
    """A grid format's grid [entries, width] (IQ2_XXS 256 x 8, IQ2_XS 512 x 8, IQ2_S 1024 x 8, IQ3_XXS 256 x 4,
    IQ3_S 512 x 4: magnitudes as uint8; IQ1_S, IQ1_M 2048 x 8 of -1, 0, 1 as int8), from the gguf package
    (llama.cpp's iq2xxs_grid, ...)."""
    from gguf import quants

    cls = getattr(quants, ggml_type)
    cls.init_grid()
    g = cls.grid.reshape(cls.grid_shape)
    return g.astype(np.int8 if g.min() < 0 else np.uint8)


def _rounded(v: np.ndarray, unit: np.ndarray, low: int, high: int) -> np.ndarray:
    """v / unit rounded to an integer in [low, high]; 0 where unit is 0 (an all-zero sub-block)."""
    inv = np.divide(np.float32(1), unit, out=np.zeros(unit.shape, np.float32), where=unit > 0)
    return np.clip(np.rint(v * inv), low, high)


def _block_d(step: np.ndarray, top: int, keep_tiny: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """A K-quant block's f16 d for sub-block scales `step` [blocks, sub-blocks] stored as integers up to `top`
    (its largest / top), and d as float32 [blocks, 1] (inf past f16's range: `quantize` refuses such blocks).
    keep_tiny: a d that f16 rounds to 0 from a nonzero largest / top is f16's least subnormal (2^-24, its sign),
    so the integers rounded from it still hold the block's scales (llama.cpp writes 0 there)."""
    want = step.max(axis=1) / np.float32(top)
    d = want.astype(np.float16)
    if keep_tiny:
        tiny = (d == 0) & (want != 0)
        d[tiny] = np.copysign(np.float32(2.0 ** -24), want[tiny]).astype(np.float16)
    return d, d.astype(np.float32)[:, None]


def _signed_block_d(scales: np.ndarray, top: int,
                    keep_tiny: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A block's f16 d for signed sub-block scales `scales` [blocks, sub-blocks] stored as integers in [-top,
    top - 1] (llama.cpp's Q3_K, Q6_K and IQ4_XS: the scale of largest magnitude is -top times d, so d takes its
    opposite sign), d as float32 [blocks, 1], and the integers (float32 [blocks, sub-blocks]); keep_tiny as
    `_block_d`'s."""
    d, d32 = _block_d(_signed_peak(scales)[:, None] / np.float32(-top), 1, keep_tiny)
    return d, d32, np.clip(np.rint(np.divide(scales, d32, out=np.zeros_like(scales), where=d32 != 0)), -top, top - 1)


def _best_scales(x: np.ndarray, low: int, high: int) -> np.ndarray:
    """The signed scale of each run of `x` [..., m] quantized to the integers low..high (low < 0 < high, |low|
    > high), as llama.cpp's make_qx_quants searches it: the run's signed peak to low - 0.1 i for i in -9..9,
    each rounding's least-squares scale, the one of least squared error kept (0 for an all-zero run)."""
    peak = _signed_peak(x)[..., None]
    best_err = np.full(peak.shape, -1.0, np.float32)
    best = np.zeros(peak.shape, np.float32)
    for i in range(-9, 10):
        inv = np.divide(np.float32(low - 0.1 * i), peak, out=np.zeros_like(peak), where=peak != 0)
        q = np.clip(np.rint(x * inv), low, high)
        sxq, sqq = (x * q).sum(axis=-1, keepdims=True), (q * q).sum(axis=-1, keepdims=True)
        gain = np.divide(sxq * sxq, sqq, out=np.zeros_like(sxq), where=sqq > 0)  # sum x^2 less the error
        better = gain > best_err
        best = np.where(better, np.divide(sxq, sqq, out=np.zeros_like(sxq), where=sqq > 0), best)
        best_err = np.maximum(gain, best_err)
    return best[..., 0]


def _min_search(x: np.ndarray, w: np.ndarray, nmax: int, rmin: float, rdelta: float, nstep: int,
                mad: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each run of `x` [runs, n] as scale * l - min (l in 0..nmax, min >= 0) as llama.cpp's make_qkx2_quants
    searches it under the weights `w` [runs, n]: the run spans [lo, hi] (lo = min(0, its least)), starting from
    the scale (hi - lo) / nmax and offset lo; then for i in 0..nstep, l = (x - lo) * (nmax + rmin + rdelta * i)
    / (hi - lo) rounded into 0..nmax, and that rounding's weighted least-squares scale and offset (an offset above
    0 set to 0, the scale refitted) become the best, lo among them (the next roundings start from it, as
    llama.cpp's), where their weighted error (absolute where `mad`, else squared) is lower. Returns float32
    (scale, min) [runs]. Vectorised over runs, transposed ([n, runs]) so a run's sums are adds of rows; a fit's
    squared error comes from its rounding's sums (sum w x^2 - scale sum w x l - offset sum w x, the least-squares
    residual), not a pass over the run."""
    xt, wt = np.ascontiguousarray(x.T), np.ascontiguousarray(w.T)    # [n, runs]
    lo = np.minimum(xt.min(axis=0), np.float32(0))
    hi = xt.max(axis=0)
    wx = wt * xt
    sw, sx, sxx = wt.sum(axis=0), wx.sum(axis=0), np.einsum("ij,ij->j", wx, xt)
    lt = np.empty_like(xt)

    def rounding(c):                                                  # l for c / (hi - lo) from lo, its sums
        span = hi - lo
        iscale = np.divide(np.float32(c), span, out=np.zeros_like(span), where=span > 0)
        np.subtract(xt, lo, out=lt)
        np.multiply(lt, iscale, out=lt)
        np.clip(np.rint(lt, out=lt), 0, nmax, out=lt)
        return (np.einsum("ij,ij->j", lt, wt), np.einsum("ij,ij,ij->j", lt, lt, wt), np.einsum("ij,ij->j", lt, wx))

    def error(s, mn, sl, sll, sxl):                                   # the weighted error of s * l + mn
        if not mad:
            return s * s * sll + 2 * s * mn * sl - 2 * s * sxl + mn * mn * sw - 2 * mn * sx + sxx
        diff = lt * s
        diff += mn
        diff -= xt
        return np.einsum("ij,ij->j", np.abs(diff, out=diff), wt)

    scale = (hi - lo) / np.float32(nmax)
    best = error(scale, lo, *rounding(nmax))
    for i in range(nstep + 1):
        sl, sll, sxl = rounding(nmax + rmin + rdelta * i)
        det = sw * sll - sl * sl
        ok = det > np.float32(1e-6) * sw * sll                        # not every l alike
        inv = np.divide(np.float32(1), det, out=np.zeros_like(det), where=ok)
        s, mn = (sw * sxl - sx * sl) * inv, (sll * sx - sl * sxl) * inv
        pos = mn > 0
        np.copyto(s, np.divide(sxl, sll, out=np.zeros_like(sxl), where=sll > 0), where=pos)
        mn[pos] = 0
        err = error(s, mn, sl, sll, sxl) if mad else sxx - s * sxl - mn * sx   # a least-squares residual
        better = ok & (err < best)
        for to, new in ((best, err), (scale, s), (lo, mn)):
            np.copyto(to, new, where=better)
    return scale, -lo


def _min_block(scales: np.ndarray, mins: np.ndarray, top: int, means: np.ndarray):
    """A min-format block's f16 d and dmin from its sub-block scales and mins [blocks, sub-blocks] (min >= 0), as
    llama.cpp's K-quants: the largest of each / top; the integers (float32, 0..top) rounded from the f16 values.
    A d or dmin too small for f16 is kept at its least subnormal (`_block_d`'s keep_tiny), not 0: a d of 0 beside
    a nonzero dmin (llama.cpp's, and this quantizer's before) decoded every weight of the block to -min.
    A sub-block whose scale still rounds to 0 decodes every weight to the one value -dmin * mn: its integer min
    is then rounded from the sub-block's mean (`means`, the constant nearest its weights), not its least value."""
    d, d32 = _block_d(np.maximum(scales, 0), top, keep_tiny=True)
    dmin, dmin32 = _block_d(mins, top, keep_tiny=True)
    sc, mn = _rounded(scales, d32, 0, top), _rounded(mins, dmin32, 0, top)
    # weights of ~1e-7 in Q4_K: sc 0 (d at 2^-24 is past their scale) and mn 3 from a min of -2e-7 put every weight
    # at -1.8e-7, relative RMS error 1.8 (Q5_K 2.3), worse than zeros; the mean's mn is 0 there
    flat = sc == 0
    if flat.any():
        mn = np.where(flat, _rounded(np.maximum(-means, 0), dmin32, 0, top), mn)
    return d, d32, sc, dmin, dmin32, mn


def _nibbles(s: np.ndarray) -> np.ndarray:
    """4-bit values [blocks, 2n] as n bytes, value 2i in the low nibble of byte i."""
    return (s[:, 0::2] | (s[:, 1::2] << 4)).astype(np.uint8)


def _k_quants(a: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K's and Q5_K's rounding of float32 [rows, k] (k a multiple of 256): the 16-byte headers (d, dmin, the
    packed 6-bit scales and mins) and the quants [blocks, 8 sub-blocks, 32] in [0, top], as llama.cpp's
    quantize_row_q4_K_ref / quantize_row_q5_K_ref: each sub-block of 32 weighted by rms(sub-block) + |w| gets
    make_qkx2_quants' scale and min (`_min_search`: Q4_K 21 steps from top - 1, Q5_K 16 from top - 0.5, 0.1
    apart), the block's f16 d and dmin their largest / 63 (`_min_block`: the 6-bit integers rounded from the f16
    values, not llama.cpp's 63 / largest; a d or dmin below f16's least subnormal kept at it, not 0), and q =
    (w + dmin * mn) / (d * sc) rounded into [0, top]."""
    x = np.ascontiguousarray(a, np.float32).reshape(-1, 8, 32)
    runs = x.reshape(-1, 32)
    w = np.sqrt((runs * runs).mean(axis=1, keepdims=True)) + np.abs(runs)
    step, mins = _min_search(runs, w, top, *((-1.0, 0.1, 20) if top == 15 else (-0.5, 0.1, 15)), mad=False)
    d, d32, sc, dmin, dmin32, mn = _min_block(step.reshape(-1, 8), mins.reshape(-1, 8), 63, x.mean(axis=2))
    sc, mn = sc.astype(np.uint8), mn.astype(np.uint8)
    scale, offset = d32 * sc, dmin32 * mn
    q = _rounded(x + offset[:, :, None], scale[:, :, None], 0, top).astype(np.uint8)
    head = np.empty((x.shape[0], 16), np.uint8)
    head[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
    head[:, 2:4] = dmin.view(np.uint8).reshape(-1, 2)
    head[:, 4:8] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    head[:, 8:12] = (mn[:, 0:4] & 63) | ((mn[:, 4:8] >> 4) << 6)
    head[:, 12:16] = (sc[:, 4:8] & 15) | ((mn[:, 4:8] & 15) << 4)
    return head, q


def _nibble_pairs(q: np.ndarray) -> np.ndarray:
    """K-quant quant bytes [blocks, 128] from quants [blocks, 8, 32]: byte 32c + l holds sub-block 2c's l-th
    quant (low nibble) and sub-block 2c + 1's (high)."""
    q = (q & 15).reshape(-1, 4, 2, 32)                                # [blocks, chunk c, low/high, l]
    return (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(-1, 128)


def _in_chunks(a: np.ndarray, block_bytes: int, blocks_of, blocks: int = 1024) -> np.ndarray:
    """The blocks (uint8 [rows, row_bytes]) of float32 `a` [rows, k] (k a multiple of 256) that `blocks_of`
    makes from weights [n, 256], given `blocks` blocks at a time: a search's temporaries stay in cache (a
    temporary the size of a large matrix cost more in page faults and memory traffic than its arithmetic)."""
    rows, k = a.shape
    x = np.ascontiguousarray(a, np.float32).reshape(-1, 256)
    out = np.empty((x.shape[0], block_bytes), np.uint8)
    for i in range(0, x.shape[0], blocks):
        out[i:i + blocks] = blocks_of(x[i:i + blocks])
    return out.reshape(rows, k // 256 * block_bytes)


def _q4_k_blocks(x: np.ndarray) -> np.ndarray:
    head, q = _k_quants(x, 15)
    return np.concatenate([head, _nibble_pairs(q)], axis=1)


def _q5_k_blocks(x: np.ndarray) -> np.ndarray:
    head, q = _k_quants(x, 31)
    qh = ((q >> 4) << np.arange(8, dtype=np.uint8)[None, :, None]).sum(axis=1, dtype=np.uint8)  # [blocks, 32]
    return np.concatenate([head, qh, _nibble_pairs(q)], axis=1)


def quantize_q4_k(a: np.ndarray) -> np.ndarray:
    """Q4_K blocks (uint8 [rows, row_bytes]) of float32 [rows, k], k a multiple of 256: 16 steps a sub-block of
    32 (`_k_quants`: llama.cpp's quantize_row_q4_K_ref)."""
    return _in_chunks(a, 144, _q4_k_blocks)


def quantize_q5_k(a: np.ndarray) -> np.ndarray:
    """Q5_K blocks (uint8 [rows, row_bytes]) of float32 [rows, k], k a multiple of 256: 32 steps a sub-block of
    32 (`_k_quants`: llama.cpp's quantize_row_q5_K_ref); the low 4 bits as Q4_K's quants, the fifth of sub-block
    j's l-th quant as bit j of qh byte l."""
    return _in_chunks(a, 176, _q5_k_blocks)


def _qx_scales(x: np.ndarray, nmax: int) -> np.ndarray:
    """The signed scale of each run of `x` [runs, n] over q in [-nmax, nmax - 1], as llama.cpp's make_qx_quants
    (rmse_type 1: weights x^2) searches it: the run's signed peak to -nmax, then to -(nmax + 0.1 i) for i in
    -9..9 (not 0), q rounded and clipped, each rounding's weighted least-squares scale (sum w x q / sum w q^2)
    kept where its gain (sum w x q)^2 / sum w q^2 is larger; 0 for a run whose peak is below 1e-15.
    Vectorised over runs, transposed ([n, runs]) so a run's sums are adds of rows."""
    xt = np.ascontiguousarray(x.T)                                    # [n, runs]
    w = xt * xt
    wx = w * xt
    peak = _signed_peak(x)
    live = np.abs(peak) >= np.float32(1e-15)
    inv = np.divide(np.float32(-1), peak, out=np.zeros_like(peak), where=live)
    lt = np.empty_like(xt)
    scale = np.zeros_like(peak)
    best = np.zeros_like(peak)
    for i in (0, *range(-9, 0), *range(1, 10)):
        np.multiply(xt, inv * np.float32(nmax + 0.1 * i), out=lt)
        np.clip(np.rint(lt, out=lt), -nmax, nmax - 1, out=lt)
        sxl, sll = np.einsum("ij,ij->j", lt, wx), np.einsum("ij,ij,ij->j", lt, lt, w)
        s = np.divide(sxl, sll, out=np.zeros_like(sxl), where=sll > 0)
        gain = s * sxl
        better = (sll > 0) & (gain > best) if i else np.ones(gain.shape, bool)
        np.copyto(scale, s, where=better)
        np.copyto(best, gain, where=better)
    return np.where(live, scale, np.float32(0))


def _q6_k_blocks(x: np.ndarray) -> np.ndarray:
    xb = x.reshape(-1, 16, 16)
    d, d32, sc = _signed_block_d(_qx_scales(x.reshape(-1, 16), 32).reshape(-1, 16), 128, keep_tiny=True)
    unit = (d32 * sc)[:, :, None]
    inv = np.divide(np.float32(1), unit, out=np.zeros(unit.shape, np.float32), where=unit != 0)
    q = (np.clip(np.rint(xb * inv), -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 4, 32)      # [b, n, m, l]
    out = np.empty((x.shape[0], 210), np.uint8)
    ql = (q[:, :, 0:2, :] & 15) | ((q[:, :, 2:4, :] & 15) << 4)      # [b, n, 2, 32]: ql bytes 64n + 32j + l
    out[:, 0:128] = ql.reshape(-1, 128)
    qh = (q[:, :, 0] >> 4) | ((q[:, :, 1] >> 4) << 2) | ((q[:, :, 2] >> 4) << 4) | ((q[:, :, 3] >> 4) << 6)
    out[:, 128:192] = qh.reshape(-1, 64)
    out[:, 192:208] = sc.astype(np.int8).view(np.uint8)
    out[:, 208:210] = d.view(np.uint8).reshape(-1, 2)
    return out


def quantize_q6_k(a: np.ndarray) -> np.ndarray:
    """Q6_K blocks (uint8 [rows, row_bytes]) of float32 [rows, k], k a multiple of 256, as llama.cpp's
    quantize_row_q6_K_ref: each sub-block of 16 gets make_qx_quants' signed scale over q in [-32, 31] (`_qx_scales`,
    weights w^2), the block's f16 d the scale of largest magnitude / -128 and the int8 sub-block scales rounded
    from that f16 d (`_signed_block_d`, llama.cpp rounds from -128 / the largest; a d below f16's least
    subnormal kept at it, not 0), and q = w / (d * scale) rounded into [-32, 31]."""
    return _in_chunks(a, 210, _q6_k_blocks)


def _two_bit_planes(q: np.ndarray) -> np.ndarray:
    """Q2_K's and Q3_K's qs bytes [blocks, 64] from 2-bit quants [blocks, 256]: byte 32n + l holds weight
    128n + 32j + l in bits 2j, 2j + 1."""
    q = (q & 3).reshape(-1, 2, 4, 32)                                 # [blocks, half n, j, l]
    return (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(-1, 64)


def _q2_k_blocks(x: np.ndarray) -> np.ndarray:
    runs = x.reshape(-1, 16)
    step, mins = _min_search(runs, np.abs(runs), 3, -0.5, 0.1, 15, mad=True)
    d, d32, sc, dmin, dmin32, mn = _min_block(step.reshape(-1, 16), mins.reshape(-1, 16), 15,
                                              x.reshape(-1, 16, 16).mean(axis=2))
    sc, mn = sc.astype(np.uint8), mn.astype(np.uint8)
    q = _rounded(x.reshape(-1, 16, 16) + (dmin32 * mn)[:, :, None], (d32 * sc)[:, :, None], 0, 3).astype(np.uint8)
    out = np.empty((x.shape[0], 84), np.uint8)
    out[:, 0:16] = sc | (mn << 4)
    out[:, 16:80] = _two_bit_planes(q.reshape(-1, 256))
    out[:, 80:82] = d.view(np.uint8).reshape(-1, 2)
    out[:, 82:84] = dmin.view(np.uint8).reshape(-1, 2)
    return out


def quantize_q2_k(a: np.ndarray) -> np.ndarray:
    """Q2_K blocks (uint8 [rows, row_bytes]) of float32 [rows, k], k a multiple of 256, as llama.cpp's
    quantize_row_q2_K_ref: each sub-block of 16 weighted by |w| gets make_qkx2_quants' scale and min under the
    weighted absolute error (`_min_search`: 16 steps from 2.5, 0.1 apart), the block's f16 d and dmin their
    largest / 15 (`_min_block`: the 4-bit integers rounded from the f16 values; a d or dmin below f16's least
    subnormal kept at it, not 0), and q = (w + dmin * mn) / (d * sc) rounded into [0, 3]."""
    return _in_chunks(a, 84, _q2_k_blocks)


def quantize_q3_k(a: np.ndarray) -> np.ndarray:
    """Q3_K blocks (uint8 [rows, row_bytes]) of float32 [rows, k], k a multiple of 256, as llama.cpp's
    quantize_row_q3_K_ref without its per-weight refinement: each sub-block of 16 gets the signed scale of least
    squared error over q in [-4, 3] (`_best_scales`: its peak near -4), rounded to a signed 6-bit multiple of the
    block's f16 d (the largest to -32: `_signed_block_d`; a d below f16's least subnormal kept at it, not 0), and
    q = w / (d * scale) rounded into [-4, 3]."""
    rows, k = a.shape
    x = np.ascontiguousarray(a, np.float32).reshape(-1, 16, 16)
    d, d32, sc = _signed_block_d(_best_scales(x, -4, 3), 32, keep_tiny=True)
    unit = (d32 * sc)[:, :, None]
    inv = np.divide(np.float32(1), unit, out=np.zeros(unit.shape, np.float32), where=unit != 0)
    q = (np.clip(np.rint(x * inv), -4, 3) + 4).astype(np.uint8).reshape(-1, 256)   # 0..7
    s6 = (sc + 32).astype(np.uint8)                                   # [blocks, 16]
    out = np.empty((x.shape[0], 110), np.uint8)
    high = (q >> 2).reshape(-1, 2, 4, 32)                             # the third bits: [blocks, n, j, l]
    out[:, 0:32] = (high << (4 * np.arange(2, dtype=np.uint8)[:, None, None]
                             + np.arange(4, dtype=np.uint8)[None, :, None])).sum(axis=(1, 2), dtype=np.uint8)
    out[:, 32:96] = _two_bit_planes(q)
    out[:, 96:100] = (s6[:, 0:4] & 15) | ((s6[:, 8:12] & 15) << 4)
    out[:, 100:104] = (s6[:, 4:8] & 15) | ((s6[:, 12:16] & 15) << 4)
    out[:, 104:108] = ((s6[:, 0:4] >> 4) | ((s6[:, 4:8] >> 4) << 2) | ((s6[:, 8:12] >> 4) << 4)
                       | ((s6[:, 12:16] >> 4) << 6))
    out[:, 108:110] = d.view(np.uint8).reshape(-1, 2)
    return out.reshape(rows, k // 256 * 110)


def _iq4_indices(x: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The IQ4 table index nearest to each x / d (d broadcast over x's last axis; where d is 0, the index of the
    value nearest 0, which d makes 0): the table is sorted, so the nearest value is the count of midpoints below."""
    inv = np.divide(np.float32(1), d, out=np.zeros(d.shape, np.float32), where=d != 0)
    table = IQ4_VALUES.astype(np.float32)
    return np.searchsorted((table[:-1] + table[1:]) / 2, x * inv).astype(np.uint8)


def _signed_peak(x: np.ndarray) -> np.ndarray:
    """The value of largest magnitude along the last axis, with its sign (IQ4's table reaches -127 but only 113:
    the peak maps to -127, so d takes the opposite sign)."""
    return np.take_along_axis(x, np.abs(x).argmax(axis=-1)[..., None], axis=-1)[..., 0]


def quantize_iq4_nl(a: np.ndarray) -> np.ndarray:
    """IQ4_NL blocks (uint8 [rows, row_bytes]) of float32 [rows, k], k a multiple of 32: d = -(the block's peak) /
    127 in f16 and each weight's nearest table value. Plain rounding, not llama.cpp's search: valid blocks."""
    rows, k = a.shape
    x = np.ascontiguousarray(a, np.float32).reshape(-1, 32)
    d = (_signed_peak(x) / np.float32(-127)).astype(np.float16)
    q = _iq4_indices(x, d.astype(np.float32)[:, None])
    out = np.empty((x.shape[0], 18), np.uint8)
    out[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
    out[:, 2:18] = q[:, :16] | (q[:, 16:] << 4)
    return out.reshape(rows, k // 32 * 18)


def quantize_iq4_xs(a: np.ndarray) -> np.ndarray:
    """IQ4_XS blocks (uint8 [rows, row_bytes]) of float32 [rows, k], k a multiple of 256: each sub-block of 32 gets
    the scale -(its peak) / 127 rounded to a 6-bit signed multiple of the block's f16 d (the signed largest
    scale / -32, as llama.cpp: +32 does not fit the 6 bits), and each weight its nearest table value under it.
    Plain rounding, not llama.cpp's search: valid blocks."""
    rows, k = a.shape
    x = np.ascontiguousarray(a, np.float32).reshape(-1, 8, 32)
    step = _signed_peak(x) / np.float32(-127)                         # [blocks, 8] signed sub-block scales
    d, d32, sc = _signed_block_d(step, 32)                  # the largest scale to -32, as llama.cpp
    q = _iq4_indices(x, (d32 * sc)[:, :, None])                       # [blocks, 8, 32]
    ls = (sc + 32).astype(np.uint16)                                  # 0..63
    out = np.empty((x.shape[0], 136), np.uint8)
    out[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
    high = ((ls >> 4) << (2 * np.arange(8, dtype=np.uint16))).sum(axis=1, dtype=np.uint16)
    out[:, 2:4] = high.view(np.uint8).reshape(-1, 2)
    out[:, 4:8] = _nibbles(ls & 15)
    out[:, 8:136] = (q[:, :, :16] | (q[:, :, 16:] << 4)).reshape(-1, 128)
    return out.reshape(rows, k // 256 * 136)


def _even_signs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """IQ2/IQ3_XXS's signs of groups of 8 weights [..., 8]: the sign bits with even parity (an odd group's
    smallest weight flips, its 8th bit is implied), as 7-bit codes, and the magnitudes."""
    neg = x < 0
    odd = neg.sum(axis=-1) % 2 == 1
    smallest = np.abs(x).argmin(axis=-1)
    flip = np.zeros_like(neg)
    np.put_along_axis(flip, smallest[..., None], odd[..., None], axis=-1)
    neg ^= flip
    codes = (neg[..., :7] << np.arange(7)).sum(axis=-1).astype(np.uint32)
    return codes, np.abs(x)


def _nearest_entries(a: np.ndarray, grid: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """The grid entry (row of `grid`, [entries, width]) nearest each row of `a` ([n, width]), in chunks: the
    least |g|^2 - 2 a.g (the squared distance less |a|^2), one matrix product a chunk."""
    g = grid.astype(np.float32)
    norms = (g * g).sum(axis=1)
    out = np.empty(a.shape[0], np.uint32)
    for i in range(0, a.shape[0], chunk):
        out[i:i + chunk] = (norms - 2 * (a[i:i + chunk] @ g.T)).argmin(axis=-1)
    return out


def _iq_round(a: np.ndarray, ggml_type: str, scale_weights: int, step: float, even: bool):
    """The common rounding of the grid formats ([rows, k] -> blocks [b]): each run of `scale_weights` weights gets
    the scale (its peak magnitude / the grid's) as d * (0.5 + s) * step, s 4 bits of the block's f16 d; the signs
    by groups of 8 (`even`: with even parity, as 7-bit codes [b, 32]; else the sign bits [b, 256]); each group of
    the grid's width its nearest entry under its scale. Returns d, s [b, 256 / scale_weights], the signs and the
    entry indices [b, 256 / width]."""
    grid = format_grid(ggml_type)
    width = grid.shape[1]
    x = np.ascontiguousarray(a, np.float32).reshape(-1, 32, 8)         # [blocks, group of 8, 8]
    if even:
        signs, mag = _even_signs(x)
    else:
        signs, mag = (x < 0).reshape(-1, 256).astype(np.uint8), np.abs(x)
    runs = mag.reshape(x.shape[0], -1, scale_weights)
    want = runs.max(axis=-1) / np.float32(grid.max())                  # [blocks, runs] wanted scales
    d, d32 = _block_d(want, 15.5 * step)
    s = np.clip(np.rint(np.divide(want, d32 * step, out=np.zeros_like(want), where=d32 > 0) - 0.5), 0, 15)
    db = (d32 * (0.5 + s) * step)[:, :, None]
    unit = np.divide(runs, db, out=np.zeros(runs.shape, np.float32), where=db > 0)
    idx = _nearest_entries(unit.reshape(-1, width), grid).reshape(x.shape[0], 256 // width)
    return d, s.astype(np.uint32), signs, idx


def _with_d(d: np.ndarray, body: list[np.ndarray], rows: int, k: int, block_bytes: int) -> np.ndarray:
    """Blocks of a grid format: d, then the fields of `body` ([blocks, bytes] each, uint8), as [rows, row_bytes]."""
    out = np.concatenate([d.view(np.uint8).reshape(-1, 2), *body], axis=1)
    assert out.shape[1] == block_bytes
    return out.reshape(rows, k // 256 * block_bytes)


def _codes_word(codes: np.ndarray) -> np.ndarray:
    """4 sign codes of 7 bits [..., 4] as one u32 each (code l at bit 7l)."""
    return (codes << (7 * np.arange(4, dtype=np.uint32))).sum(axis=-1, dtype=np.uint32)


def quantize_iq2_xxs(a: np.ndarray) -> np.ndarray:
    """IQ2_XXS blocks (uint8 [rows, row_bytes]) of float32 [rows, k], k a multiple of 256 (`_iq_round`: nearest
    grid entries, not llama.cpp's search, which needs an importance matrix: valid blocks, larger error)."""
    rows, k = a.shape
    d, s, codes, idx = _iq_round(a, "IQ2_XXS", 32, 0.25, even=True)
    pairs = np.empty((d.size, 8, 2), np.uint32)
    pairs[:, :, 0] = (idx.reshape(-1, 8, 4) << (8 * np.arange(4, dtype=np.uint32))).sum(axis=-1, dtype=np.uint32)
    pairs[:, :, 1] = _codes_word(codes.reshape(-1, 8, 4)) | (s << 28)
    return _with_d(d, [pairs.astype("<u4").view(np.uint8).reshape(-1, 64)], rows, k, 66)


def quantize_iq2_xs(a: np.ndarray) -> np.ndarray:
    """IQ2_XS blocks of float32 [rows, k] (as quantize_iq2_xxs, a scale a 16 weights)."""
    rows, k = a.shape
    d, s, codes, idx = _iq_round(a, "IQ2_XS", 16, 0.25, even=True)
    qs = (idx | (codes << 9)).astype("<u2")                            # [blocks, 32]
    return _with_d(d, [qs.view(np.uint8).reshape(-1, 64), _nibbles(s)], rows, k, 74)


def quantize_iq2_s(a: np.ndarray) -> np.ndarray:
    """IQ2_S blocks of float32 [rows, k] (as quantize_iq2_xs, the signs as they are: no parity)."""
    rows, k = a.shape
    d, s, neg, idx = _iq_round(a, "IQ2_S", 16, 0.25, even=False)
    signs = (neg.reshape(-1, 32, 8) << np.arange(8, dtype=np.uint8)).sum(axis=-1, dtype=np.uint8)
    qh = ((idx.reshape(-1, 8, 4) >> 8) << (2 * np.arange(4, dtype=np.uint32))).sum(axis=-1).astype(np.uint8)
    return _with_d(d, [(idx & 255).astype(np.uint8), signs, qh, _nibbles(s)], rows, k, 82)


def quantize_iq3_xxs(a: np.ndarray) -> np.ndarray:
    """IQ3_XXS blocks of float32 [rows, k] (as quantize_iq2_xxs)."""
    rows, k = a.shape
    d, s, codes, idx = _iq_round(a, "IQ3_XXS", 32, 0.5, even=True)
    words = (_codes_word(codes.reshape(-1, 8, 4)) | (s << 28)).astype("<u4")
    return _with_d(d, [idx.astype(np.uint8), words.view(np.uint8).reshape(-1, 32)], rows, k, 98)


def quantize_iq3_s(a: np.ndarray) -> np.ndarray:
    """IQ3_S blocks of float32 [rows, k] (scales d * (1 + 2s) a sub-block of 32, the signs as they are)."""
    rows, k = a.shape
    d, s, neg, idx = _iq_round(a, "IQ3_S", 32, 2.0, even=False)
    qh = ((idx.reshape(-1, 8, 8) >> 8) << np.arange(8, dtype=np.uint32)).sum(axis=-1).astype(np.uint8)
    signs = (neg.reshape(-1, 32, 8) << np.arange(8, dtype=np.uint8)).sum(axis=-1, dtype=np.uint8)
    return _with_d(d, [(idx & 255).astype(np.uint8), qh, signs, _nibbles(s)], rows, k, 110)


def _iq1_round(a: np.ndarray, scale_weights: int, delta_weights: int):
    """IQ1_S's and IQ1_M's rounding ([rows, k] -> blocks [b]): each run of `scale_weights` weights gets the scale
    (its peak / 1.125) as d * (2s + 1), s 3 bits of the block's f16 d; each run of `delta_weights` the delta
    -0.125 where its mean is negative, else +0.125; each group of 8 the grid entry (of -1, 0, 1) nearest
    w / scale - delta. Returns d, s [b, 256 / scale_weights], the negative deltas [b, 256 / delta_weights] and the
    indices [b, 32]."""
    grid = format_grid("IQ1_S")
    x = np.ascontiguousarray(a, np.float32).reshape(-1, 32, 8)
    runs = x.reshape(x.shape[0], -1, scale_weights)
    want = np.abs(runs).max(axis=-1) / np.float32(1.125)
    d, d32 = _block_d(want, 15)
    s = np.clip(np.rint((np.divide(want, d32, out=np.zeros_like(want), where=d32 > 0) - 1) / 2), 0, 7)
    dl = (d32 * (2 * s + 1))[:, :, None]
    neg = x.reshape(x.shape[0], -1, delta_weights).mean(axis=-1) < 0
    delta = np.repeat(np.where(neg, np.float32(-0.125), np.float32(0.125)), delta_weights // 8, axis=1)[:, :, None]
    unit = np.divide(runs, dl, out=np.zeros(runs.shape, np.float32), where=dl > 0).reshape(-1, 32, 8) - delta
    idx = _nearest_entries(unit.reshape(-1, 8), grid).reshape(x.shape[0], 32)
    return d, s.astype(np.uint32), neg.astype(np.uint32), idx


def quantize_iq1_s(a: np.ndarray) -> np.ndarray:
    """IQ1_S blocks of float32 [rows, k], k a multiple of 256 (`_iq1_round`, a delta a sub-block: nearest grid
    entries, not llama.cpp's search, which needs an importance matrix: valid blocks, larger error)."""
    rows, k = a.shape
    d, s, neg, idx = _iq1_round(a, 32, 32)
    high = ((idx.reshape(-1, 8, 4) >> 8) << (3 * np.arange(4, dtype=np.uint32))).sum(axis=-1, dtype=np.uint32)
    qh = (high | (s << 12) | (neg << 15)).astype("<u2")
    return _with_d(d, [(idx & 255).astype(np.uint8), qh.view(np.uint8).reshape(-1, 16)], rows, k, 50)


def quantize_iq1_m(a: np.ndarray) -> np.ndarray:
    """IQ1_M blocks of float32 [rows, k], k a multiple of 256 (as quantize_iq1_s, a scale a 16 weights, a delta a
    group of 8; d stored as the top nibbles of the 4 scale words)."""
    rows, k = a.shape
    d, s, neg, idx = _iq1_round(a, 16, 8)
    qh = _nibbles(((idx >> 8) | (neg << 3)).astype(np.uint32))       # a nibble a group: 3 index bits, delta sign
    scales = (s.reshape(-1, 4, 4) << (3 * np.arange(4, dtype=np.uint32))).sum(axis=-1, dtype=np.uint32)
    bits = d.view(np.uint16).astype(np.uint32)[:, None]
    scales |= ((bits >> (4 * np.arange(4, dtype=np.uint32))) & 15) << 12
    out = np.concatenate([(idx & 255).astype(np.uint8), qh, scales.astype("<u2").view(np.uint8).reshape(-1, 8)], axis=1)
    return out.reshape(rows, k // 256 * 56)


# ggml_blocks.quantize's quantizer of each format gguf has none for
QUANTIZERS = {"Q2_K": quantize_q2_k, "Q3_K": quantize_q3_k, "Q4_K": quantize_q4_k, "Q5_K": quantize_q5_k,
              "Q6_K": quantize_q6_k, "IQ4_NL": quantize_iq4_nl, "IQ4_XS": quantize_iq4_xs,
              "IQ2_XXS": quantize_iq2_xxs, "IQ2_XS": quantize_iq2_xs, "IQ2_S": quantize_iq2_s,
              "IQ3_XXS": quantize_iq3_xxs, "IQ3_S": quantize_iq3_s, "IQ1_S": quantize_iq1_s, "IQ1_M": quantize_iq1_m}
