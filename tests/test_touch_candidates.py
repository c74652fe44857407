"""The touch candidates (gemv_core_touch.wgsl, attention_fused_steps_touch.wgsl: one word of W's or K/V's line read
TOUCH steps ahead of the loads, used TOUCH_RING steps later), forced, against float64 numpy: the GEMV with the
fused norm and a residual at 1-8 rows and odd sizes, the fused split-K decode at GQA 4 over 1-1100 keys. They are
never planned (registry order / experimental) until an A/B on a GPU (benchmarks/touch_ab.py) says they win."""

import numpy as np
import pytest

import wgraph as wg

GEMV = [("gemv_r8_wide_t4_f16", (1, 8)), ("gemv_r8_wide_t8_f16", (3,)), ("gemv_r8_long_t4_f16", (5,)),
        ("gemv_r8_long_t8_f16", (8,)), ("gemv_r1_wide_t4_f16", (1,)), ("gemv_r1_long_t4_f16", (1,)),
        ("gemv_r1_t4_f16", (1,)), ("gemv_r1_t8_f16", (1,))]


@pytest.mark.parametrize("variant,rows", GEMV)
def test_touch_gemv_against_float64(dev, rng, variant, rows):
    for m in rows:
        for n, k in [(37, 64), (130, 1032)]:
            x = rng.standard_normal((m, k)).astype(np.float32)
            w = rng.standard_normal((n, k)).astype(np.float16)
            r = rng.standard_normal((m, n)).astype(np.float32)
            g = rng.standard_normal(k).astype(np.float32)
            got = wg.ops.linear(dev.tensor(x), dev.tensor(w), None, norm=dev.tensor(g), residual=dev.tensor(r),
                                variant=variant).numpy()
            x64 = x.astype(np.float64)
            xn = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * g
            exact = xn @ w.astype(np.float64).T + r
            bound = np.abs(xn) @ np.abs(w.astype(np.float64)).T
            assert np.all(np.abs(got - exact) <= 1e-5 * bound + 1e-6), (variant, m, n, k)


@pytest.mark.parametrize("variant", ["decode_fused_g4_t4", "decode_fused_g4_t8"])
@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_touch_decode_against_float64(dev, rng, variant, dt):
    npdt = np.float16 if dt == "f16" else np.float32
    for d, keys in ((64, 1), (128, 37), (64, 1100)):
        hq, hkv = 8, 2
        q, k, v = (rng.standard_normal(s).astype(npdt) for s in ((1, hq, d), (keys, hkv, d), (keys, hkv, d)))
        got = wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(v), causal=False,
                               variant=f"{variant}_{dt}").numpy().astype(np.float64)
        q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
        kh, vh = np.repeat(k64, hq // hkv, axis=1), np.repeat(v64, hq // hkv, axis=1)
        s = np.einsum("hd,lhd->hl", q64[0], kh) / np.sqrt(d)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        exact = np.einsum("hl,lhd->hd", p / p.sum(axis=1, keepdims=True), vh)
        assert np.abs(got[0] - exact).max() <= (2e-3 if dt == "f16" else 2e-5), (variant, dt, d, keys)
