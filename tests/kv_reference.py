"""Float64 numpy references for the KV-cache ops, tiered attention and BDPA (independent of wgraph's code)."""

from __future__ import annotations

import numpy as np

QMAX = {"int8": 127, "int4": 7}
VALS_PER_WORD = {"int8": 4, "int4": 8}
BITS = {"int8": 8, "int4": 4}


def f16_ceil(s):
    """Smallest float16 >= s, elementwise."""
    s = np.asarray(s, np.float64)
    h = s.astype(np.float16)
    low = h.astype(np.float64) < s
    h[low] = np.nextafter(h[low], np.float16(np.inf))
    return h


def quantize(x, mode):
    """Codes (int64 [n, H, D]) and f16 scales ([n, H]) of symmetric per (row, head) quantization."""
    x = np.asarray(x, np.float64)
    scale = f16_ceil(np.abs(x).max(axis=-1) / QMAX[mode])
    s = scale.astype(np.float64)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        codes = np.where(s > 0, np.rint(x / np.where(s > 0, s, 1)), 0)
    return np.clip(codes, -QMAX[mode], QMAX[mode]).astype(np.int64), scale


def pack(codes, mode):
    """u32 words [n, H, D / vals_per_word], value k of a word in bits [BITS*k, BITS*(k+1))."""
    vpw, bits = VALS_PER_WORD[mode], BITS[mode]
    c = (np.asarray(codes, np.int64) & ((1 << bits) - 1)).astype(np.uint64)
    c = c.reshape(*c.shape[:-1], c.shape[-1] // vpw, vpw)
    shifts = (np.arange(vpw, dtype=np.uint64) * np.uint64(bits))
    return (c << shifts).sum(axis=-1).astype(np.uint32)


def unpack(words, mode):
    vpw, bits = VALS_PER_WORD[mode], BITS[mode]
    w = np.asarray(words, np.uint32).astype(np.int64)[..., None]
    c = (w >> (np.arange(vpw) * bits)) & ((1 << bits) - 1)
    c = np.where(c >= (1 << (bits - 1)), c - (1 << bits), c)
    return c.reshape(*c.shape[:-2], -1)


def dequantize(codes, scales):
    return np.asarray(codes, np.float64) * np.asarray(scales, np.float64)[..., None]


def attention(q, k, v, q_pos, k_pos, *, scale=None, causal=True, sliding_window=0, softcap=0.0):
    """q [S, Hq, D], k/v [L, Hkv, D]; q_pos [S], k_pos [L] absolute positions. float64 out [S, Hq, D]."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    S, Hq, D = q.shape
    Hkv = k.shape[1]
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    kk = np.repeat(k, Hq // Hkv, axis=1)
    vv = np.repeat(v, Hq // Hkv, axis=1)
    s = np.einsum("shd,lhd->hsl", q, kk) * scale
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    qp = np.asarray(q_pos)[:, None]
    kp = np.asarray(k_pos)[None, :]
    mask = np.zeros(s.shape[1:], bool)
    if causal:
        mask |= kp > qp
    if sliding_window > 0:
        mask |= kp <= qp - sliding_window
    s = np.where(mask[None], -np.inf, s)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    p = np.exp(s - m)
    den = p.sum(axis=-1, keepdims=True)
    p = np.where(den > 0, p / np.where(den > 0, den, 1), 0)
    return np.einsum("hsl,lhd->shd", p, vv)


def rope_tables(n_pos, head_dim, base=10000.0):
    """cos, sin [n_pos, head_dim / 2] of half-split RoPE."""
    inv = base ** (-np.arange(head_dim // 2, dtype=np.float64) * 2 / head_dim)
    ang = np.arange(n_pos, dtype=np.float64)[:, None] * inv[None]
    return np.cos(ang), np.sin(ang)


def rope(x, pos, cos, sin):
    """Half-split RoPE of x [L, H, D] at positions pos [L]."""
    x = np.asarray(x, np.float64)
    half = x.shape[-1] // 2
    c, s = cos[pos][:, None, :], sin[pos][:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def paged_rows(n_rows, page_size, page_table):
    """Physical row of each logical row under a page table."""
    j = np.arange(n_rows)
    return np.asarray(page_table)[j // page_size] * page_size + j % page_size


def softmax_output_bound(delta_scores, v_abs_max, v_err):
    """Bound on |o' - o| when every score moves by at most delta and every value by at most v_err.

    p'_j / p_j lies in [e^-2d, e^2d], so sum_j |p'_j - p_j| <= e^(2d) - 1 and
    |o' - o| <= (e^(2d) - 1) * max|v| + v_err.
    """
    return np.expm1(2 * delta_scores) * v_abs_max + v_err


def rope_rows(x, cos, sin, positions):
    """Rotate-half RoPE of x [rows, heads, D] at `positions` (row i at positions[i]) with tables [max_pos, D / 2],
    in float64."""
    half = x.shape[-1] // 2
    c = cos[positions][:, None, :].astype(np.float64)
    s = sin[positions][:, None, :].astype(np.float64)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, b * c + a * s], -1)
