"""Float64 numpy reference for wg.ops.sdpa with torch's semantics ([..., H, L, D]; top-left causal; bool masks
take part where True, float masks add), and FlashAttention's tolerance rule against it."""

from __future__ import annotations

import numpy as np


def sdpa_reference(q, k, v, attn_mask=None, is_causal=False, scale=None, enable_gqa=False,
                   compute_dtype=np.float64, out_dtype=None):
    """q [..., Hq, L, D], k/v [..., Hkv, S, D] -> [..., Hq, L, D]; a row with no key taking part is 0, and a key a
    row does not see (masked) never counts, not even a NaN or inf in its k or v row."""
    ct = compute_dtype
    hq, L, D = ((1,) + q.shape)[-3:]
    hkv, S = ((1,) + k.shape)[-3], k.shape[-2]
    if enable_gqa:
        k = np.repeat(k, hq // hkv, axis=-3)
        v = np.repeat(v, hq // hkv, axis=-3)
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    s = np.einsum("...ld,...sd->...ls", q.astype(ct), k.astype(ct)).astype(ct) * ct(scale)
    keep = np.ones(s.shape, bool)
    if is_causal:
        keep &= np.tril(np.ones((L, S), bool))
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        if m.dtype == bool:
            keep &= np.broadcast_to(m, s.shape)
        else:
            s = (s + m.astype(ct)).astype(ct)
            keep &= np.broadcast_to(m != -np.inf, s.shape)
    s = np.where(keep, s, -np.inf)
    mx = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
    mx = np.where(np.isfinite(mx), mx, 0)
    p = np.where(keep, np.exp(s - mx), 0).astype(ct)
    l = p.sum(axis=-1, keepdims=True)
    # a key the row does not see never counts, its v row included (0 * NaN would spread a masked key's NaN or inf:
    # docs/errors.md, nan-propagates), so P.V sums only the keys it keeps
    with np.errstate(invalid="ignore"):   # 0 * inf where a kept key weighs 0: NaN, as the kernels' IEEE math
        pv = np.where(keep[..., None], p[..., None] * v.astype(ct)[..., None, :, :], 0)
    o = pv.sum(axis=-2, dtype=ct).astype(ct)
    # a row with no key taking part is 0; a NaN l (a NaN or +inf score took part) keeps its NaN, as torch does
    with np.errstate(invalid="ignore"):   # inf / inf where a +inf score took part: NaN, as torch
        o = np.where((l > 0) | np.isnan(l), o / np.where(l > 0, l, 1), 0)
    return o.astype(out_dtype or ct)


def sdpa_tolerance_check(got, q, k, v, **options):
    """max|kernel - f64| <= 2 * max|the same math in f32, rounded to the output dtype - f64| + atol."""
    out_dtype = got.dtype
    truth = sdpa_reference(q, k, v, **options)
    base = sdpa_reference(q, k, v, compute_dtype=np.float32, out_dtype=out_dtype, **options)
    err = float(np.max(np.abs(got.astype(np.float64) - truth), initial=0.0))
    base_err = float(np.max(np.abs(base.astype(np.float64) - truth), initial=0.0))
    bound = 2.0 * base_err + (2e-3 if out_dtype == np.float16 else 2e-5)
    return err <= bound, err, base_err, bound
