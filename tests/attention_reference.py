"""Float64 numpy reference for wgraph attention (docs/attention.md, "The rules"), and the same math in a
kernel's precision for FlashAttention's tolerance rule."""

from __future__ import annotations

import numpy as np

LAYOUTS = ("contiguous", "ring", "paged")


def kv_rows_for(kv_len, *, kv_start=0, kv_layout="contiguous", kv_rows=None, page_table=None, page_size=0):
    """Rows of the k/v buffers that hold keys 0..kv_len-1 (key j is absolute position kv_start + j)."""
    j = np.arange(kv_len)
    if kv_layout == "contiguous":
        return j
    if kv_layout == "ring":
        return (kv_start + j) % kv_rows
    if kv_layout == "paged":
        table = np.asarray(page_table, dtype=np.int64)
        return table[j // page_size] * page_size + j % page_size
    raise ValueError(kv_layout)


def visible_mask(seq_len, kv_len, *, causal=True, start_pos=None, kv_start=0, sliding_window=0,
                 kv_layout="contiguous", kv_rows=None):
    """[S, kv_len] bool: True where query i sees key j."""
    if start_pos is None:                       # bottom-right aligned, as in FlashAttention
        start_pos = kv_start + kv_len - seq_len
    qpos = start_pos + np.arange(seq_len)[:, None]
    kpos = kv_start + np.arange(kv_len)[None, :]
    mask = np.ones((seq_len, kv_len), dtype=bool)
    if causal:
        mask &= kpos <= qpos
    if sliding_window:
        mask &= kpos > qpos - sliding_window
    if kv_layout == "ring":                     # only the last kv_rows keys are still stored
        mask &= np.arange(kv_len)[None, :] >= kv_len - kv_rows
    return mask


def attention_reference(q, k, v, *, causal=True, scale=None, start_pos=None, kv_start=0, kv_len=None,
                        sliding_window=0, softcap=0.0, kv_layout="contiguous", page_table=None, page_size=0,
                        compute_dtype=np.float64, out_dtype=None):
    """q [S, Hq, D], k/v [rows, Hkv, D] -> out [S, Hq, D].

    compute_dtype=np.float64 is the truth; np.float32 with out_dtype=the kernel's output dtype is "the same
    math in the kernel's precision" that the tolerance rule compares against."""
    S, Hq, D = q.shape
    rows, Hkv, Dk = k.shape
    assert Dk == D and v.shape == k.shape and Hq % Hkv == 0
    if kv_len is None:
        kv_len = rows if kv_layout != "paged" else len(page_table) * page_size
    if scale is None:
        scale = 1.0 / np.sqrt(D)
    ct = compute_dtype
    row = kv_rows_for(kv_len, kv_start=kv_start, kv_layout=kv_layout, kv_rows=rows,
                      page_table=page_table, page_size=page_size)
    kk = k.astype(ct)[row]                      # [kv_len, Hkv, D]
    vv = v.astype(ct)[row]
    group = Hq // Hkv
    kk = np.repeat(kk, group, axis=1)           # q head h reads kv head h // group
    vv = np.repeat(vv, group, axis=1)
    qq = q.astype(ct)
    s = np.einsum("shd,jhd->hsj", qq, kk).astype(ct) * ct(scale)
    if softcap:
        c = ct(softcap)
        s = (c * np.tanh(s / c)).astype(ct)
    mask = visible_mask(S, kv_len, causal=causal, start_pos=start_pos, kv_start=kv_start,
                        sliding_window=sliding_window, kv_layout=kv_layout, kv_rows=rows)[None]
    s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True, initial=-np.inf)  # initial: kv_len 0 (no keys) -> zeros
    m = np.where(np.isfinite(m), m, 0)
    p = np.where(mask, np.exp(s - m), 0).astype(ct)
    l = p.sum(axis=-1, keepdims=True)
    o = np.einsum("hsj,jhd->shd", p, vv).astype(ct)
    l = np.transpose(l, (1, 0, 2))              # [S, Hq, 1]
    o = np.where(l > 0, o / np.where(l > 0, l, 1), 0)   # fully masked rows -> 0
    return o.astype(out_dtype or ct)


def tolerance_check(got, q, k, v, *, out_dtype, atol=None, **options):
    """FlashAttention's rule: max|kernel - f64| <= factor * max|same math in kernel precision - f64| + atol,
    factor 2 (3 with softcap). Returns (ok, kernel_err, baseline_err, bound)."""
    truth = attention_reference(q, k, v, **options)
    base = attention_reference(q, k, v, compute_dtype=np.float32, out_dtype=out_dtype, **options)
    kernel_err = float(np.max(np.abs(got.astype(np.float64) - truth), initial=0.0))
    base_err = float(np.max(np.abs(base.astype(np.float64) - truth), initial=0.0))
    factor = 3.0 if options.get("softcap") else 2.0
    if atol is None:
        atol = 2e-3 if np.dtype(out_dtype) == np.float16 else 2e-5
    bound = factor * base_err + atol
    return kernel_err <= bound, kernel_err, base_err, bound
