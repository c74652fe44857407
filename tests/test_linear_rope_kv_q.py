"""`linear_rope_kv_append` on a QuantizedWeight against float64 (the weights as the `gguf` package dequantizes the
blocks; RMSNorm, bias, rotate-half RoPE at positions pos + r, k and v at those cache rows, nothing else written):
each GGML format, odd sizes, f32 and f16 caches, int and GPU positions; one dispatch for a row of x, linear_q +
rope_kv_append for more; the plan (first registry match, else the two ops and why)."""

import gguf
import numpy as np
import pytest
from gguf.quants import dequantize as gguf_dequantize

import wgraph as wg
from kernel_support import skip_unless_f16, skip_unless_runs
from kv_reference import rope_rows
from wgraph.device import Caps
from wgraph.ggml_blocks import FORMATS, quantize
from wgraph.kernels.registry import kernels_for
from wgraph.ops.linear_rope_kv_q import plan_linear_rope_kv_q

NP = {"f32": np.float32, "f16": np.float16}


def _want(x, qw, b, g, heads, d):
    """q/k/v heads in float64 (gguf's dequantized W), and the sum of magnitudes that bounds f32 rounding."""
    w = gguf_dequantize(qw.raw(), gguf.GGMLQuantizationType[qw.ggml_type]).astype(np.float64)
    h = x.astype(np.float64)
    if g is not None:
        h = h / np.sqrt(np.mean(h * h, -1, keepdims=True) + 1e-6) * g
    y = h @ w.T + (0 if b is None else b)
    scale = np.abs(h) @ np.abs(w).T + (0 if b is None else np.abs(b))
    return y.reshape(len(x), heads, d), scale.reshape(len(x), heads, d)


@pytest.mark.parametrize("ggml_type,blocks,hq,hkv,d,kdt,gpu_pos,bias,norm", [
    ("Q8_0", 3, 3, 1, 8, "f32", False, True, True),    # 96 features: lanes past a row's end; GQA 3:1
    ("Q4_0", 5, 2, 1, 8, "f16", True, False, True),
    ("Q4_1", 1, 4, 2, 8, "f32", True, True, False),
    ("Q4_K", 1, 2, 1, 64, "f16", False, True, True),   # Q4_K: k % 256; head_dim 64
    ("Q5_K", 1, 2, 1, 64, "f32", True, False, True),
    ("Q5_0", 3, 2, 1, 16, "f16", False, True, True),  # Q5_0: odd and even blocks
    ("Q5_1", 2, 2, 1, 16, "f32", True, False, True),
    ("Q6_K", 3, 2, 1, 16, "f32", True, True, True),    # Q6_K: 3 blocks, the second starting mid-word
    ("Q3_K", 3, 2, 1, 16, "f16", False, True, True),   # Q3_K: 110-byte blocks, the second starting mid-word
    ("Q2_K", 2, 2, 1, 16, "f32", True, False, True),
    ("IQ4_NL", 3, 2, 1, 16, "f16", True, True, True),  # IQ4_NL: Q4_0's odd and even blocks
    ("IQ4_XS", 2, 2, 1, 16, "f32", False, False, True),
    ("IQ2_XXS", 3, 2, 1, 16, "f16", True, True, True),   # 66-byte blocks, the second starting mid-word
    ("IQ3_XXS", 3, 2, 1, 16, "f32", False, True, False),
    ("IQ2_XS", 3, 2, 1, 16, "f32", True, False, True),    # 74-byte blocks
    ("IQ2_S", 2, 2, 1, 16, "f16", False, True, True),
    ("IQ3_S", 3, 2, 1, 16, "f16", True, True, False),  # 110-byte blocks, the second starting mid-word
    ("IQ1_S", 3, 2, 1, 16, "f32", False, True, True),   # 50-byte blocks, the second starting mid-word
    ("IQ1_M", 2, 2, 1, 16, "f16", True, False, True)])
def test_one_row_against_float64_in_one_dispatch(dev, rng, ggml_type, blocks, hq, hkv, d, kdt, gpu_pos, bias,
                                                 norm):
    skip_unless_f16(dev, kdt)
    k = blocks * FORMATS[ggml_type].block_weights
    n = (hq + 2 * hkv) * d
    cap, pos = 20, 13
    cos, sin = wg.ops.rope_tables(32, d)
    qw = quantize(rng.standard_normal((n, k)).astype(np.float32), ggml_type)
    x = rng.standard_normal((1, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    g = (1 + 0.5 * rng.standard_normal(k)).astype(np.float32) if norm else None
    want, scale = _want(x, qw, b, g, hq + 2 * hkv, d)
    old = rng.standard_normal((cap, hkv, d)).astype(NP[kdt])
    kc, vc = dev.tensor(old), dev.tensor(old[::-1].copy())
    p = dev.tensor(np.array([pos - 2], np.uint32)) if gpu_pos else pos
    t = lambda a: None if a is None else dev.tensor(a)  # noqa: E731
    w = qw.upload(dev)
    before = dev.stats.snapshot()
    q = wg.ops.linear_rope_kv_append(t(x), w, t(cos), t(sin), (kc, vc), p, q_heads=hq, b=t(b), norm=t(g),
                                     pos_offset=2 if gpu_pos else 0)
    got_q, got_k, got_v = q.numpy(), kc.numpy(), vc.numpy()
    assert dev.stats.since(before).dispatches == 1
    where = np.array([pos])
    # f32 sums: a few ulps of the sum of magnitudes (a rotation mixes two such sums)
    tol = 4e-6 * scale.max() + 1e-5
    assert got_q.shape == (1, hq, d) and got_q.dtype == np.float32
    np.testing.assert_allclose(got_q, rope_rows(want[:, :hq], cos, sin, where), rtol=0, atol=tol)
    ctol = tol if kdt == "f32" else 2e-3 * np.abs(want).max() + tol
    np.testing.assert_allclose(got_k[where], rope_rows(want[:, hq:hq + hkv], cos, sin, where), rtol=0, atol=ctol)
    np.testing.assert_allclose(got_v[where], want[:, hq + hkv:], rtol=0, atol=ctol)
    keep = np.setdiff1d(np.arange(cap), where)
    assert got_k[keep].tobytes() == old[keep].tobytes() and got_v[keep].tobytes() == old[::-1][keep].tobytes()


def test_more_rows_run_linear_then_rope_kv_append(dev, rng):
    """3 rows: no fused variant takes them; two dispatches, the same float64 result, and the plan says why."""
    hq, hkv, d, k, pos = 2, 1, 8, 64, 4
    n = (hq + 2 * hkv) * d
    cos, sin = wg.ops.rope_tables(16, d)
    qw = quantize(rng.standard_normal((n, k)).astype(np.float32), "Q4_1")
    x = rng.standard_normal((3, k)).astype(np.float32)
    want, scale = _want(x, qw, None, None, hq + 2 * hkv, d)
    kc, vc = dev.tensor(np.zeros((8, hkv, d), np.float32)), dev.tensor(np.zeros((8, hkv, d), np.float32))
    before = dev.stats.snapshot()
    q = wg.ops.linear_rope_kv_append(dev.tensor(x), qw.upload(dev), dev.tensor(cos), dev.tensor(sin), (kc, vc), pos,
                                     q_heads=hq)
    got_q, got_k = q.numpy(), kc.numpy()
    assert dev.stats.since(before).dispatches == 2
    where = np.arange(pos, pos + 3)
    tol = 4e-6 * scale.max() + 1e-5
    np.testing.assert_allclose(got_q, rope_rows(want[:, :hq], cos, sin, where), rtol=0, atol=tol)
    np.testing.assert_allclose(got_k[where], rope_rows(want[:, hq:hq + hkv], cos, sin, where), rtol=0, atol=tol)
    np.testing.assert_allclose(vc.numpy()[where], want[:, hq + hkv:], rtol=0, atol=tol)
    plan = plan_linear_rope_kv_q(3, n, k, "Q4_1", "f32", dev.caps)
    assert not plan.fused and "takes at most 1 rows" in plan.reason and "then rope_kv_append" in plan.reason


SUBGROUPS = Caps.synthetic(has_subgroups=True, max_workgroup_storage=32768)
PLAIN = Caps.synthetic()
CPU = Caps.synthetic(has_subgroups=True, max_workgroup_storage=32768, is_cpu=True)


@pytest.mark.parametrize("caps", [SUBGROUPS, PLAIN, None, CPU], ids=["subgroups", "plain", "any-device", "cpu"])
def test_plan_is_the_first_registry_match(caps):
    """The first variant of the format and cache dtype (registry order) whose features the device has (a CPU
    adapter's own class only on one), for one row; the plain GEMV's plan (linear_q) otherwise. Every format and
    cache dtype has a fused kernel."""
    assert {(kv.facts["ggml_type"], kv.facts["cache_dtype"]) for kv in kernels_for("linear_rope_kv_append_q")} == {
        (t, c) for t in FORMATS for c in ("f32", "f16")}
    for kv in kernels_for("linear_rope_kv_append_q"):  # the layout as the format's own
        fmt = FORMATS[kv.facts["ggml_type"]]
        assert (kv.limits["block_weights"], kv.limits["block_bytes"]) == (fmt.block_weights, fmt.block_bytes)
    for t in FORMATS:
        for cdt in ("f32", "f16"):
            for rows in (1, 2):
                plan = plan_linear_rope_kv_q(rows, 3072, 2048, t, cdt, caps)
                takers = [kv for kv in kernels_for("linear_rope_kv_append_q")
                          if kv.facts["ggml_type"] == t and kv.facts["cache_dtype"] == cdt
                          and (caps is None or set(kv.features) <= caps.features)
                          and (not kv.facts.get("cpu_only") or (caps is not None and caps.is_cpu))]
                if rows == 1 and takers:
                    assert plan.fused and plan.variant == takers[0].name, (t, cdt, caps)
                else:
                    assert not plan.fused and plan.variant == wg.ops.plan_linear_q(rows, 3072, 2048, t,
                                                                                    caps=caps).variant


def test_fused_variant_past_a_cpu_adapters_loop_cap_is_passed_over():
    """The fused kernel walks a row as linear_q's GEMV does (quant_gemv_core.wgsl), so lavapipe's 65535-iteration
    cap holds for it too: Q4_0's one-row fused kernel (32 lanes reading whole blocks, x staged a step at a time) costs
    3 iterations a 1024-weight step, so 22000 steps (66000) pass the cap. On a CPU adapter the next fused variant
    takes the call (32 lanes sharing blocks, x read from memory: 512 weights an iteration, 44000); a GPU fuses it
    with the first."""
    k = 22000 * 1024
    gpu = Caps.synthetic(has_subgroups=True, max_workgroup_storage=32768)
    cpu = Caps.synthetic(has_subgroups=True, max_workgroup_storage=32768, is_cpu=True)
    assert plan_linear_rope_kv_q(1, 96, k, "Q4_0", "f32", gpu).variant == "quant_gemv_rope_kv_r1_q4_0_f32kv"
    plan = plan_linear_rope_kv_q(1, 96, k, "Q4_0", "f32", cpu)
    assert plan.fused and plan.variant == "quant_gemv_rope_kv_r1_wg_q4_0_f32kv", plan
    assert plan_linear_rope_kv_q(1, 96, 21000 * 1024, "Q4_0", "f32", cpu).variant == "quant_gemv_rope_kv_r1_q4_0_f32kv"


@pytest.mark.parametrize("name,ggml_type", [("quant_gemv_rope_kv_r1_q8_0_f32kv", "Q8_0"),  # a GPU's, for a CPU
                                            ("quant_gemv_rope_kv_r1_q4_0_f16kv", "Q4_0"),  # adapter plans its own
                                            ("quant_gemv_rope_kv_r1_q4_1_f32kv", "Q4_1"),
                                            ("quant_gemv_rope_kv_r1_cpu_q4_1_f16kv", "Q4_1"),
                                            ("quant_gemv_rope_kv_r1_wg_q4_k_f32kv", "Q4_K"),
                                            ("quant_gemv_rope_kv_r1_wg_q4_0_f16kv", "Q4_0"),
                                            ("quant_gemv_rope_kv_r1_wg_q5_k_f16kv", "Q5_K"),
                                            ("quant_gemv_rope_kv_r1_wg_q5_0_f32kv", "Q5_0"),
                                            ("quant_gemv_rope_kv_r1_wg_q6_k_f32kv", "Q6_K"),
                                            ("quant_gemv_rope_kv_r1_wg_q3_k_f16kv", "Q3_K"),
                                            ("quant_gemv_rope_kv_r1_wg_q2_k_f32kv", "Q2_K"),
                                            ("quant_gemv_rope_kv_r1_wg_iq4_xs_f16kv", "IQ4_XS"),
                                            ("quant_gemv_rope_kv_r1_wg_iq3_xxs_f32kv", "IQ3_XXS"),
                                            ("quant_gemv_rope_kv_r1_wg_iq2_s_f16kv", "IQ2_S"),
                                            ("quant_gemv_rope_kv_r1_wg_iq1_m_f32kv", "IQ1_M")])
def test_variants_the_planner_does_not_pick_here(dev, rng, fresh_templates, monkeypatch, name, ggml_type):
    """The entries for devices without subgroups (the planner picks the subgroup ones on lavapipe) and the 1-row
    classes of the adapter class this device is not (a GPU's on a CPU adapter, a CPU's on a GPU), run by replacing
    the plan."""
    skip_unless_runs(dev, name)
    skip_unless_f16(dev, name.rsplit("_", 1)[1])
    import wgraph.ops.linear_rope_kv_q as lrkq

    monkeypatch.setattr(lrkq, "plan_linear_rope_kv_q", lambda *a, **kw: lrkq.LinearRopeKVPlan(name, "forced", True))
    hq, hkv, d, pos = 2, 1, 8, 5
    k, n = 2 * FORMATS[ggml_type].block_weights, (hq + 2 * hkv) * d
    kdt = name[-5:-2]  # the entry's cache dtype
    cos, sin = wg.ops.rope_tables(8, d)
    qw = quantize(rng.standard_normal((n, k)).astype(np.float32), ggml_type)
    x = rng.standard_normal((1, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    g = (1 + 0.5 * rng.standard_normal(k)).astype(np.float32)
    want, scale = _want(x, qw, b, g, hq + 2 * hkv, d)
    kc, vc = dev.tensor(np.zeros((8, hkv, d), NP[kdt])), dev.tensor(np.zeros((8, hkv, d), NP[kdt]))
    before = dev.stats.snapshot()
    q = wg.ops.linear_rope_kv_append(dev.tensor(x), qw.upload(dev), dev.tensor(cos), dev.tensor(sin), (kc, vc), pos,
                                     q_heads=hq, b=dev.tensor(b), norm=dev.tensor(g))
    got_q, got_k, got_v = q.numpy(), kc.numpy(), vc.numpy()
    assert dev.stats.since(before).dispatches == 1
    tol = 4e-6 * scale.max() + 1e-5
    ctol = tol if kdt == "f32" else 2e-3 * np.abs(want).max() + tol
    np.testing.assert_allclose(got_q, rope_rows(want[:, :hq], cos, sin, np.array([pos])), rtol=0, atol=tol)
    np.testing.assert_allclose(got_k[[pos]], rope_rows(want[:, hq:hq + hkv], cos, sin, np.array([pos])), rtol=0,
                               atol=ctol)
    np.testing.assert_allclose(got_v[[pos]], want[:, hq + hkv:], rtol=0, atol=ctol)
    assert not got_k[np.arange(8) != pos].any() and not got_v[np.arange(8) != pos].any()


def test_bad_arguments_leave_the_caches(dev, rng):
    hq, hkv, d, k = 2, 1, 8, 32
    n = (hq + 2 * hkv) * d
    cos, sin = wg.ops.rope_tables(8, d)
    w = quantize(rng.standard_normal((n, k)).astype(np.float32), "Q8_0").upload(dev)
    x = dev.tensor(rng.standard_normal((1, k)).astype(np.float32))
    kc, vc = dev.tensor(np.ones((8, hkv, d), np.float32)), dev.tensor(np.ones((8, hkv, d), np.float32))
    c, s = dev.tensor(cos), dev.tensor(sin)
    with pytest.raises(wg.ShapeError, match=r"linear_rope_kv_append: w must be \[\(q_heads.*Q8_0 \[32, 32\]"):
        wg.ops.linear_rope_kv_append(x, w, c, s, (kc, vc), 0, q_heads=hq + 1)
    with pytest.raises(wg.ShapeError, match="linear_rope_kv_append: linear: bias"):
        wg.ops.linear_rope_kv_append(x, w, c, s, (kc, vc), 0, q_heads=hq, b=dev.tensor(np.zeros(n - 1, np.float32)))
    with pytest.raises(wg.ShapeError, match=r"linear_rope_kv_append: linear: x must be \[\.\.\., 32\]"):
        wg.ops.linear_rope_kv_append(dev.tensor(np.zeros((1, 16), np.float32)), w, c, s, (kc, vc), 0, q_heads=hq)
    with pytest.raises(wg.LimitError, match="linear_rope_kv_append: positions 8..8"):
        wg.ops.linear_rope_kv_append(x, w, c, s, (kc, vc), 8, q_heads=hq)
    assert np.all(kc.numpy() == 1) and np.all(vc.numpy() == 1)
