"""Float64 numpy reference of one sequence's attention with FlashAttention's rules (bottom-right causal,
window_size (left, right), softcap), returning the output and the log-sum-exp, and FlashAttention's tolerance
rule for both."""

from __future__ import annotations

import numpy as np


def window_mask(S: int, L: int, causal: bool, window=(-1, -1)) -> np.ndarray:
    """[S, L] bool: query i (position i + L - S) sees key j (position j)."""
    qpos = np.arange(S)[:, None] + L - S
    kpos = np.arange(L)[None, :]
    mask = np.ones((S, L), dtype=bool)
    if causal:
        mask &= kpos <= qpos
    if window[0] >= 0:
        mask &= kpos >= qpos - window[0]
    if window[1] >= 0:
        mask &= kpos <= qpos + window[1]
    return mask


def reference(q, k, v, *, causal, window=(-1, -1), scale=None, softcap=0.0, compute_dtype=np.float64,
              out_dtype=None):
    """q [S, Hq, D], k/v [L, Hkv, D] -> (out [S, Hq, D], lse [Hq, S]); a row that sees no key: 0 and -inf."""
    S, Hq, D = q.shape
    L, Hkv, _ = k.shape
    ct = compute_dtype
    scale = ct(1.0 / np.sqrt(D) if scale is None else scale)
    kk = np.repeat(k.astype(ct), Hq // Hkv, axis=1)
    vv = np.repeat(v.astype(ct), Hq // Hkv, axis=1)
    s = np.einsum("shd,jhd->hsj", q.astype(ct), kk).astype(ct) * scale
    if softcap:
        s = (ct(softcap) * np.tanh(s / ct(softcap))).astype(ct)
    mask = window_mask(S, L, causal, window)[None]
    s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0).astype(ct)
    p = np.where(mask, np.exp(s - m), 0).astype(ct)
    l = p.sum(axis=-1, keepdims=True)
    o = np.einsum("hsj,jhd->shd", p, vv).astype(ct)
    lt = np.transpose(l, (1, 0, 2))
    o = np.where(lt > 0, o / np.where(lt > 0, lt, 1), 0)
    with np.errstate(divide="ignore"):
        lse = np.where(l[..., 0] > 0, m[..., 0] + np.log(np.where(l[..., 0] > 0, l[..., 0], 1)), -np.inf)
    return o.astype(out_dtype or ct), lse


def check(got_out, got_lse, q, k, v, *, out_dtype, **options):
    """FlashAttention's rule on out and lse: error <= factor x the error of the same math in the kernel's
    precision (f32, output rounded to out_dtype) + atol; factor 2 (3 with softcap). -inf lse must match exactly.
    Returns a message, or None when both pass."""
    truth, lse_t = reference(q, k, v, **options)
    base, lse_b = reference(q, k, v, compute_dtype=np.float32, out_dtype=out_dtype, **options)
    factor = 3.0 if options.get("softcap") else 2.0
    atol = 2e-3 if np.dtype(out_dtype) == np.float16 else 2e-5
    err = float(np.max(np.abs(got_out.astype(np.float64) - truth), initial=0.0))
    bound = factor * float(np.max(np.abs(base.astype(np.float64) - truth), initial=0.0)) + atol
    if not err <= bound:
        return f"out error {err:.3g} > bound {bound:.3g}"
    if got_lse is None:
        return None
    finite = np.isfinite(lse_t)
    if not np.array_equal(np.isneginf(got_lse), ~finite):
        return f"lse -inf at {np.argwhere(np.isneginf(got_lse)).tolist()}, expected at {np.argwhere(~finite).tolist()}"
    lerr = float(np.max(np.abs(got_lse[finite] - lse_t[finite]), initial=0.0))
    lbound = factor * float(np.max(np.abs(lse_b[finite] - lse_t[finite]), initial=0.0)) + 1e-5
    if not lerr <= lbound:
        return f"lse error {lerr:.3g} > bound {lbound:.3g}"
    return None
