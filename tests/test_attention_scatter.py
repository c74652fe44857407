"""The REDUCE = "scatter" candidates of the fused split-K decode (decode_fused_scatter_g1/_g4/_g8: experimental, so
forced) against float64. A key row spans LPR = head_dim / 8 lanes and a step holds NV = keys x heads pairs; on
lavapipe's 8-lane subgroups head_dim 8-64 take the shuffle path. Where a lane ends with C = NV / LPR <= G_TILE pairs
(C heads of one key: g1 at D 32 and 64, g4 at D 16-64, g8 at D 16-64) it takes their exps itself, on the path for
that C (1, 2, 4, 8); where C > G_TILE (g1 at D 16, g4 f16 at D 8 and 16, g8 at D 8) the sums go back to every lane;
D 128 (16 lanes a row) sums through workgroup memory. tests/test_subgroup_sizes.py runs D 128 on 16-lane
subgroups."""

import zlib

import numpy as np
import pytest

from attention_calls import run_attention
from attention_reference import attention_reference, tolerance_check
from kernel_support import skip_unless_f16, skip_unless_runs
from wgraph.kernels.registry import registry

PAGE_TABLE = [5, 0, 3, 1, 4, 2, 7, 6]

# (variant, heads q/kv, head_dim, kv length, options): every G_TILE, dtype and path above, lengths that leave a
# partial step (1, 3: fewer keys than a step's KS * U slots) and partial chunks (67, 300), and each option
CASES = [
    ("decode_fused_scatter_g1_f32", (4, 4), 32, 1, {}),
    ("decode_fused_scatter_g1_f16", (4, 4), 64, 3, {}),
    ("decode_fused_scatter_g1_f16kv", (4, 4), 32, 300, dict(softcap=2.5, scale=0.4)),
    ("decode_fused_scatter_g1_f32", (4, 4), 64, 67, dict(sliding_window=17)),
    ("decode_fused_scatter_g1_f32", (4, 4), 128, 67, {}),
    ("decode_fused_scatter_g4_f32", (8, 2), 64, 67, {}),
    ("decode_fused_scatter_g4_f32", (4, 4), 64, 300, dict(kv_len=250, gpu_kv_len=True)),
    ("decode_fused_scatter_g4_f32", (8, 2), 32, 3, {}),
    ("decode_fused_scatter_g4_f32", (8, 2), 128, 300, dict(softcap=4.0)),
    ("decode_fused_scatter_g4_f16", (8, 2), 64, 300, {}),
    ("decode_fused_scatter_g4_f16", (8, 2), 32, 1, {}),
    ("decode_fused_scatter_g4_f16", (4, 4), 64, 67, dict(sliding_window=9)),
    ("decode_fused_scatter_g4_f16", (8, 2), 128, 64, dict(paged=8, kv_len=61)),
    ("decode_fused_scatter_g4_f16kv", (8, 2), 64, 64, dict(paged=8, kv_len=45, gpu_kv_len=True, softcap=4.0)),
    ("decode_fused_scatter_g4_f16kv", (8, 2), 32, 300, dict(softcap=2.5, scale=0.4)),
    ("decode_fused_scatter_g4_f16kv", (8, 2), 128, 3, {}),
    ("decode_fused_scatter_g8_f32", (8, 1), 64, 67, {}),
    ("decode_fused_scatter_g8_f16", (8, 1), 32, 300, dict(sliding_window=17)),
    ("decode_fused_scatter_g8_f16kv", (8, 2), 64, 3, {}),
    ("decode_fused_scatter_g8_f16", (8, 1), 128, 67, dict(kv_len=40, gpu_kv_len=True)),
    ("decode_fused_scatter_g1_f16", (4, 4), 16, 67, {}),
    ("decode_fused_scatter_g4_f32", (8, 2), 16, 300, dict(sliding_window=17)),
    ("decode_fused_scatter_g4_f16", (8, 2), 16, 67, dict(softcap=2.5, scale=0.4)),
    ("decode_fused_scatter_g4_f16kv", (8, 2), 8, 300, {}),
    ("decode_fused_scatter_g8_f16", (8, 1), 16, 64, dict(paged=8, kv_len=50)),
    ("decode_fused_scatter_g8_f32", (8, 2), 8, 3, {}),
]


def _inputs(rng, dtype, rows, hq, hkv, d):
    qdt = np.float16 if dtype == "f16" else np.float32
    kdt = np.float32 if dtype == "f32" else np.float16
    return (rng.standard_normal((1, hq, d)).astype(qdt), rng.standard_normal((rows, hkv, d)).astype(kdt),
            rng.standard_normal((rows, hkv, d)).astype(kdt))


def _run(dev, variant, q, k, v, opt):
    out, ref = run_attention(dev, variant, q, k, v, opt, PAGE_TABLE)
    return out.numpy(), ref


def _skip(dev, variant):
    skip_unless_runs(dev, variant)
    skip_unless_f16(dev, variant.rsplit("_", 1)[1])


@pytest.mark.parametrize("variant,heads,d,rows,opt", [pytest.param(*c, id=f"{c[0]}-{c[1][0]}x{c[1][1]}x{c[2]}-L{c[3]}-"
                                                                         f"{'+'.join(c[4]) or 'causal'}")
                                                      for c in CASES])
def test_scatter_matches_reference(dev, variant, heads, d, rows, opt):
    _skip(dev, variant)
    assert registry()[variant].facts.get("experimental")   # the planner passes over it: forced here
    rng = np.random.default_rng(zlib.crc32(f"{variant}{heads}{d}{rows}{sorted(opt.items())}".encode()))
    q, k, v = _inputs(rng, variant.rsplit("_", 1)[1], rows, *heads, d)
    got, ref = _run(dev, variant, q, k, v, opt)
    assert np.isfinite(got).all()
    ok, err, base, bound = tolerance_check(got, q, k, v, out_dtype=np.float16 if variant.endswith("_f16") else
                                           np.float32, **ref)
    assert ok, f"{variant}: error {err:.3g} > bound {bound:.3g} (same math in kernel precision: {base:.3g})"


@pytest.mark.parametrize("where", ["v", "k"])
@pytest.mark.parametrize("variant,d", [("decode_fused_scatter_g4_f32", 64), ("decode_fused_scatter_g4_f16", 64),
                                       ("decode_fused_scatter_g1_f32", 32), ("decode_fused_scatter_g4_f16kv", 128),
                                       ("decode_fused_scatter_g8_f16", 16)])
def test_scatter_nan_reaches_only_rows_that_see_it(dev, variant, d, where):
    """docs/errors.md: a NaN in K/V reaches only the rows that see that key. Kv head 0's V (or K) is NaN at key 60
    (seen by the decode query) and at key 20 (outside its 17-key window): the q heads of kv head 0 are NaN, every
    other head matches float64 (the own-pair paths take each head's max over its own lanes only)."""
    _skip(dev, variant)
    hq, hkv = (4, 4) if "_g1_" in variant else (8, 2)
    rng = np.random.default_rng(7)
    q, k, v = _inputs(rng, variant.rsplit("_", 1)[1], 67, hq, hkv, d)
    bad = v if where == "v" else k
    bad[60, 0, 5] = np.nan
    bad[20, 0, 3] = np.nan
    got, ref = _run(dev, variant, q, k, v, dict(sliding_window=17))
    group = hq // hkv
    assert np.isnan(got[0, :group]).any(axis=-1).all(), "a row that sees the NaN key lost it"
    assert np.isfinite(got[0, group:]).all(), "the NaN reached a row that does not see its key"
    k, v = (np.nan_to_num(a, nan=0.0) for a in (k, v))
    truth = attention_reference(q, k, v, **ref)
    tol = 4e-3 if variant.endswith("_f16") else 2e-4
    np.testing.assert_allclose(got[0, group:], truth[0, group:], atol=tol, rtol=tol)
