"""`linear_rope_kv_append` against float64 numpy (RMSNorm, GEMV with bias, rotate-half RoPE at positions pos + r,
k and v written at those cache rows, nothing else written): f32 and f16 weights and caches, GEMV load tails,
1-8 rows, int and GPU positions, GQA, head_dim 8 and 64, contiguous, ring and paged caches; one dispatch; equal
to linear + rope_kv_append; GPU positions beyond the tables or the cache reported; the plan (first registry
match, else linear + rope_kv_append for calls no fused GEMV takes)."""

import numpy as np
import pytest

import wgraph as wg
from kernel_support import f16_or_f32, skip_unless_f16, skip_unless_runs
from kv_reference import rope_rows
from wgraph.kernels.registry import kernels_for
from wgraph.ops.linear_rope_kv import plan_linear_rope_kv

NP = {"f32": np.float32, "f16": np.float16}


def _case(rng, rows, hq, hkv, d, k, wdt, bias, norm):
    n = (hq + 2 * hkv) * d
    x = rng.standard_normal((rows, k)).astype(np.float32)
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(NP[wdt])
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    g = (1 + 0.5 * rng.standard_normal(k)).astype(np.float32) if norm else None
    h = x.astype(np.float64)
    if norm:
        h = h / np.sqrt(np.mean(h * h, -1, keepdims=True) + 1e-6) * g
    qkv = h @ w.astype(np.float64).T + (b if bias else 0)
    return x, w, b, g, qkv.reshape(rows, hq + 2 * hkv, d)


def _run(dev, op, x, w, b, g, cos, sin, caches, pos, hq, **kw):
    t = lambda a: None if a is None else dev.tensor(a)  # noqa: E731
    return op(t(x), t(w), t(cos), t(sin), caches, pos, q_heads=hq, b=t(b), norm=t(g), **kw)


def _two_ops(x, w, cos, sin, cache, pos, *, q_heads, b=None, norm=None, **kw):
    return wg.ops.rope_kv_append(wg.ops.linear(x, w, b, norm=norm), cos, sin, cache, pos, q_heads=q_heads, **kw)


@pytest.mark.parametrize("rows,hq,hkv,d,k,wdt,kdt,gpu_pos,bias,norm", [
    (1, 4, 2, 8, 40, "f32", "f32", False, True, True),    # 10 loads per row: lanes past the end of a row
    (1, 2, 1, 64, 72, "f16", "f16", True, True, True),
    (1, 4, 2, 8, 16, "f16", "f32", False, False, False),
    (3, 4, 2, 8, 24, "f16", "f32", True, False, True),
    (8, 2, 1, 64, 48, "f32", "f16", False, True, False),
    (5, 3, 3, 8, 32, "f16", "f16", False, True, True)])
def test_against_float64(dev, rng, rows, hq, hkv, d, k, wdt, kdt, gpu_pos, bias, norm):
    skip_unless_f16(dev, wdt, kdt)
    cap, pos = 24, 11
    cos, sin = wg.ops.rope_tables(32, d)
    x, w, b, g, want = _case(rng, rows, hq, hkv, d, k, wdt, bias, norm)
    old = rng.standard_normal((cap, hkv, d)).astype(NP[kdt])
    kc, vc = dev.tensor(old), dev.tensor(old[::-1].copy())
    p = dev.tensor(np.array([pos - 2], np.uint32)) if gpu_pos else pos
    before = dev.stats.snapshot()
    q = _run(dev, wg.ops.linear_rope_kv_append, x, w, b, g, cos, sin, (kc, vc), p, hq,
             pos_offset=2 if gpu_pos else 0)
    got_q, got_k, got_v = q.numpy(), kc.numpy(), vc.numpy()
    assert dev.stats.since(before).dispatches == 1
    where = np.arange(pos, pos + rows)
    assert got_q.shape == (rows, hq, d) and got_q.dtype == np.float32
    np.testing.assert_allclose(got_q, rope_rows(want[:, :hq], cos, sin, where), rtol=1e-4, atol=1e-4)
    tol = 1e-4 if kdt == "f32" else 4e-3
    np.testing.assert_allclose(got_k[where], rope_rows(want[:, hq:hq + hkv], cos, sin, where), rtol=tol, atol=tol)
    np.testing.assert_allclose(got_v[where], want[:, hq + hkv:], rtol=tol, atol=tol)
    keep = np.setdiff1d(np.arange(cap), where)
    assert got_k[keep].tobytes() == old[keep].tobytes() and got_v[keep].tobytes() == old[::-1][keep].tobytes()


@pytest.mark.parametrize("rows,k", [(2, 40), (1, 37), (9, 16)])  # fused; in_features 37: GEMM; 9 rows: GEMM
def test_same_as_linear_then_rope_kv_append(dev, rng, rows, k):
    hq, hkv, d, cap = 4, 2, 8, 16
    cos, sin = wg.ops.rope_tables(32, d)
    x, w, b, g, want = _case(rng, rows, hq, hkv, d, k, "f32", True, True)
    got = []
    for op in (wg.ops.linear_rope_kv_append, _two_ops):
        kc, vc = dev.tensor(np.zeros((cap, hkv, d), np.float32)), dev.tensor(np.zeros((cap, hkv, d), np.float32))
        q = _run(dev, op, x, w, b, g, cos, sin, (kc, vc), 3, hq)
        got.append((q.numpy(), kc.numpy(), vc.numpy()))
    for fused, apart in zip(*got):
        np.testing.assert_allclose(fused, apart, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[0][0], rope_rows(want[:, :hq], cos, sin, np.arange(3, 3 + rows)), atol=1e-4)


def test_ring_and_paged_layouts(dev, rng):
    hq, hkv, d, rows = 2, 1, 8, 3
    cos, sin = wg.ops.rope_tables(64, d)
    wdt = wg.dtypes.dtype_name_of(f16_or_f32(dev))   # the weights' dtype is not the point: f32 where f16 is not
    x, w, b, g, want = _case(rng, rows, hq, hkv, d, 16, wdt, False, True)
    k_want = rope_rows(want[:, hq:hq + hkv], cos, sin, np.arange(10, 13))
    zeros = lambda n: dev.tensor(np.zeros((n, hkv, d), np.float32))  # noqa: E731
    # a ring of 8 rows: positions 10..12 land on rows 2..4
    kc, vc = zeros(8), zeros(8)
    _run(dev, wg.ops.linear_rope_kv_append, x, w, b, g, cos, sin, (kc, vc), 10, hq, layout="ring")
    np.testing.assert_allclose(kc.numpy()[2:5], k_want, atol=1e-4)
    assert not kc.numpy()[[0, 1, 5, 6, 7]].any()
    # pages of 4 rows, table [3, 0, 2, 1]: positions 10, 11 on physical page 2 (rows 10, 11), 12 on page 1 (row 4)
    table = dev.tensor(np.array([3, 0, 2, 1], np.uint32))
    kc, vc = zeros(16), zeros(16)
    _run(dev, wg.ops.linear_rope_kv_append, x, w, b, g, cos, sin, (kc, vc), 10, hq, layout="paged",
         page_table=table, page_size=4)
    np.testing.assert_allclose(kc.numpy()[[10, 11, 4]], k_want, atol=1e-4)
    np.testing.assert_allclose(vc.numpy()[[10, 11, 4]], want[:, hq + hkv:], atol=1e-4)
    assert np.count_nonzero(np.abs(vc.numpy()).sum((1, 2))) == 3


def test_gpu_positions_beyond_tables_or_cache_are_reported(dev, rng):
    hq, hkv, d = 2, 1, 8
    cos, sin = wg.ops.rope_tables(8, d)
    x, w, b, g, _ = _case(rng, 2, hq, hkv, d, 16, "f32", True, True)
    zeros = lambda n: dev.tensor(np.zeros((n, hkv, d), np.float32))  # noqa: E731
    kc, vc = zeros(20), zeros(20)
    q = _run(dev, wg.ops.linear_rope_kv_append, x, w, b, g, cos, sin, (kc, vc), dev.tensor(np.array([7], np.uint32)),
             hq)
    with pytest.raises(wg.GpuValueError, match="rope"):
        dev.check_errors()
    got = q.numpy()
    assert np.all(got[1] == 0) and np.any(got[0] != 0)  # position 8 is past the 8-row tables: zeros
    assert np.all(kc.numpy()[8] == 0) and np.any(kc.numpy()[7] != 0)
    assert np.all(vc.numpy()[8] == 0) and np.any(vc.numpy()[7] != 0)  # no v row either (it was written: k old, v new)
    # a cache of 8 rows, tables of 8: position 8 is past both; 7 is written
    cos, sin = wg.ops.rope_tables(16, d)
    kc, vc = zeros(8), zeros(8)
    _run(dev, wg.ops.linear_rope_kv_append, x, w, b, g, cos, sin, (kc, vc), dev.tensor(np.array([7], np.uint32)), hq)
    with pytest.raises(wg.GpuValueError):
        dev.check_errors()
    assert np.any(kc.numpy()[7] != 0) and np.any(vc.numpy()[7] != 0)


def test_plan_is_the_first_registry_match(dev):
    # the table: f16 weights and caches take the long-row class from k >= 4096, the 1-row class below, 2..8 rows
    # the 8-row classes; 9 rows and in_features no 16-byte f16 load divides run linear, then rope_kv_append
    cases = [((1, 3072, 2048), "gemv_rope_kv_r1_f16w_f16kv"), ((1, 6144, 4096), "gemv_rope_kv_r1_long_f16w_f16kv"),
             ((4, 3072, 2048), "gemv_rope_kv_r8_f16w_f16kv"), ((8, 6144, 4096), "gemv_rope_kv_r8_long_f16w_f16kv")]
    for (rows, n, k), name in cases:
        plan = plan_linear_rope_kv(rows, n, k, "f16", "f16", None)
        assert plan.fused and plan.variant == name, plan
    for rows, k in ((9, 2048), (1, 2044)):
        plan = plan_linear_rope_kv(rows, 3072, k, "f16", "f16", None)
        assert not plan.fused and "rope_kv_append" in plan.reason and plan.variant.startswith("linear_gemm")
    assert {kv.facts["cache_dtype"] for kv in kernels_for("linear_rope_kv_append")} == {"f32", "f16"}
    # on this device: a CPU adapter's own class (lavapipe), the 1-row subgroup kernel, or its workgroup-memory twin
    # without subgroups
    want = ("gemv_rope_kv_r1_wg_f32w_f32kv" if not dev.caps.has_subgroups
            else "gemv_rope_kv_r1_cpu_f32w_f32kv" if dev.caps.is_cpu else "gemv_rope_kv_r1_f32w_f32kv")
    assert plan_linear_rope_kv(1, 32, 16, "f32", "f32", dev.caps).variant == want


def test_bad_arguments_leave_the_caches(dev, rng):
    hq, hkv, d = 2, 1, 8
    cos, sin = wg.ops.rope_tables(8, d)
    x, w, b, g, _ = _case(rng, 1, hq, hkv, d, 16, "f32", True, True)
    kc, vc = dev.tensor(np.ones((8, hkv, d), np.float32)), dev.tensor(np.ones((8, hkv, d), np.float32))
    with pytest.raises(wg.ShapeError, match=r"linear_rope_kv_append: w must be \[\(q_heads"):
        _run(dev, wg.ops.linear_rope_kv_append, x, w, b, g, cos, sin, (kc, vc), 0, hq + 1)
    with pytest.raises(wg.ShapeError, match="linear_rope_kv_append: linear: bias"):
        _run(dev, wg.ops.linear_rope_kv_append, x, w, b[:-1], g, cos, sin, (kc, vc), 0, hq)
    with pytest.raises(wg.LimitError, match="linear_rope_kv_append: positions 8..8"):
        _run(dev, wg.ops.linear_rope_kv_append, x, w, b, g, cos, sin, (kc, vc), 8, hq)
    with pytest.raises(wg.ArgumentError, match="linear_rope_kv_append.*eps"):
        _run(dev, wg.ops.linear_rope_kv_append, x, w, b, g, cos, sin, (kc, vc), 0, hq, eps=0.0)
    assert np.all(kc.numpy() == 1) and np.all(vc.numpy() == 1)


@pytest.mark.parametrize("name,rows,wdt,kdt", [("gemv_rope_kv_r1_wg_f16w_f16kv", 1, "f16", "f16"),
                                               # the GPU's 1-row class (a CPU adapter plans its own) and the CPU's
                                               ("gemv_rope_kv_r1_f32w_f32kv", 1, "f32", "f32"),
                                               ("gemv_rope_kv_r1_f16w_f16kv", 1, "f16", "f16"),
                                               ("gemv_rope_kv_r1_cpu_f16w_f32kv", 1, "f16", "f32"),
                                               ("gemv_rope_kv_r8_wg_f32w_f32kv", 6, "f32", "f32"),
                                               ("gemv_rope_kv_r8_long_f16w_f32kv", 2, "f16", "f32"),
                                               # the 8B shape's class, its epilogue's loads taken ahead of the sums
                                               ("gemv_rope_kv_r1_long_f16w_f16kv", 1, "f16", "f16"),
                                               ("gemv_rope_kv_r1_long_f32w_f32kv", 1, "f32", "f32")])
def test_variants_the_planner_does_not_pick_here(dev, rng, fresh_templates, monkeypatch, name, rows, wdt, kdt):
    # the workgroup-memory entries (devices without subgroups), the long-row classes and the 1-row class of the
    # adapter class this device is not, run by replacing the plan
    import wgraph.ops.linear_rope_kv as lrk

    skip_unless_runs(dev, name)   # the long-row classes sum by subgroups
    skip_unless_f16(dev, wdt, kdt)
    monkeypatch.setattr(lrk, "plan_linear_rope_kv", lambda *a, **kw: lrk.LinearRopeKVPlan(name, "forced", True))
    hq, hkv, d, k, cap, pos = 4, 2, 8, 56, 12, 3
    cos, sin = wg.ops.rope_tables(16, d)
    x, w, b, g, want = _case(rng, rows, hq, hkv, d, k, wdt, True, True)
    kc, vc = dev.tensor(np.zeros((cap, hkv, d), NP[kdt])), dev.tensor(np.zeros((cap, hkv, d), NP[kdt]))
    before = dev.stats.snapshot()
    q = _run(dev, wg.ops.linear_rope_kv_append, x, w, b, g, cos, sin, (kc, vc), pos, hq)
    got_q, got_k, got_v = q.numpy(), kc.numpy(), vc.numpy()
    assert dev.stats.since(before).dispatches == 1
    where = np.arange(pos, pos + rows)
    tol = 1e-4 if kdt == "f32" else 4e-3
    np.testing.assert_allclose(got_q, rope_rows(want[:, :hq], cos, sin, where), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_k[where], rope_rows(want[:, hq:hq + hkv], cos, sin, where), rtol=tol, atol=tol)
    np.testing.assert_allclose(got_v[where], want[:, hq + hkv:], rtol=tol, atol=tol)
    assert not got_k[np.setdiff1d(np.arange(cap), where)].any()


def test_quantized_weight_runs_linear_q_then_rope_kv_append(dev, rng):
    from wgraph import ggml_blocks

    hq, hkv, d, k = 2, 1, 8, 32
    cos, sin = wg.ops.rope_tables(16, d)
    x, w, b, g, _ = _case(rng, 2, hq, hkv, d, k, "f32", True, True)
    qw = ggml_blocks.quantize(w, "Q8_0").upload(dev)
    got = []
    for op in (wg.ops.linear_rope_kv_append, _two_ops):
        kc, vc = dev.tensor(np.zeros((8, hkv, d), np.float32)), dev.tensor(np.zeros((8, hkv, d), np.float32))
        out = dev.tensor(np.zeros((2, hq, d), np.float32))
        kw = dict(out=out) if op is wg.ops.linear_rope_kv_append else {}
        q = op(dev.tensor(x), qw, dev.tensor(cos), dev.tensor(sin), (kc, vc), 4, q_heads=hq, b=dev.tensor(b),
               norm=dev.tensor(g), **kw)
        got.append((q.numpy(), kc.numpy(), vc.numpy()))
        if kw:
            assert out.numpy().tobytes() == got[-1][0].tobytes() and out.numpy().any()
    for fused, apart in zip(*got):
        assert fused.tobytes() == apart.tobytes()
