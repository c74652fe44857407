"""The prefill GEMM (`linear` with more than 8 rows of x, linear_gemm.wgsl) against float64 numpy: every tile
configuration of the registry forced, both weight dtypes, odd M, N and K, bias and no bias, K split in
slices; the planner's rule on a fixed registry against a table; forced-argument errors. Bound (as
tests/test_dense.py): the kernel's error is at most 2x that of the same math in f32 numpy, plus atol."""

import attrs
import numpy as np
import pytest

import wgraph as wg
from kernel_support import f16_or_f32, skip_unless_f16, skip_unless_runs
from wgraph.device import Caps
from wgraph.kernels.registry import load_registry, registry, SHADER_DIR
from wgraph.ops import dense

GEMMS = [name for name, kv in registry().items() if kv.facts.get("form") == "gemm"]


def _within(got, exact, same_math_f32, atol, factor=2.0):
    ref_err = np.abs(same_math_f32.astype(np.float64) - exact)
    err = np.abs(got.astype(np.float64) - exact)
    assert np.all(err <= factor * ref_err + atol), float(np.max(err - factor * ref_err))


def _check(dev, rng, m, n, k, wdtype, bias, **kw):
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float16 if wdtype == "f16" else np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    got = wg.ops.linear(dev.tensor(x), dev.tensor(w), dev.tensor(b) if bias else None, **kw).numpy()
    w32 = w.astype(np.float32)  # f16 weights are the exact operand
    exact = x.astype(np.float64) @ w32.astype(np.float64).T + (b if bias else 0.0)
    assert got.shape == (m, n) and got.dtype == np.float32
    _within(got, exact, x @ w32.T + (b if bias else np.float32(0)), atol=1e-5 * np.sqrt(k))


# (m, n, k): odd rows and features around the 64- and 128-wide tiles, k around the 16-deep slices
ANY_K = [(9, 7, 1), (33, 65, 7), (65, 9, 33), (127, 33, 65), (130, 129, 127)]
VEC4_K = [(9, 7, 4), (33, 65, 36), (65, 9, 68), (127, 33, 132), (130, 129, 20)]


@pytest.mark.parametrize("variant", GEMMS)
def test_every_configuration_against_float64(dev, rng, variant):
    skip_unless_runs(dev, variant)   # 32x256 and 128x128 exceed WebGPU's default 16 KiB of workgroup memory
    kv = registry()[variant]
    skip_unless_f16(dev, kv.facts["weight_dtype"])
    cases = ANY_K if kv.limits["k_multiple"] == 1 else VEC4_K
    for i, (m, n, k) in enumerate(cases):
        _check(dev, rng, m, n, k, kv.facts["weight_dtype"], bias=i % 2 == 0, variant=variant)


@pytest.mark.parametrize("wdtype", ["f32", "f16"])
def test_split_k_against_float64(dev, rng, wdtype):
    """K in slices (the first pass writes partial sums to a scratch, the second adds them and the bias): two
    dispatches; slices that do not divide k, and more slices asked for than 16-deep steps exist."""
    skip_unless_f16(dev, wdtype)
    for m, n, k, split, slices in ((33, 40, 100, 3, 3), (9, 70, 40, 3, 3), (17, 5, 36, 8, 3)):
        plan = dense.plan_linear(m, n, k, wdtype, None, split_k=split)
        assert plan.splits == slices and f"K in {slices} slices" in plan.reason
        before = dev.stats.snapshot()
        _check(dev, rng, m, n, k, wdtype, bias=True, split_k=split)
        assert dev.stats.since(before).dispatches == 2


def test_many_rows_planned(dev, rng):
    """300 rows (3 tiles of the tallest configuration) with batch dimensions, as a model's prefill calls it."""
    wdt = f16_or_f32(dev)   # a model's f16 weights, f32 where the device lacks shader-f16
    x = rng.standard_normal((3, 100, 72)).astype(np.float32)
    w = rng.standard_normal((50, 72)).astype(wdt)
    b = rng.standard_normal(50).astype(np.float32)
    plan = dense.plan_linear(300, 50, 72, wg.dtypes.dtype_name_of(wdt), None)
    assert registry()[plan.variant].facts["form"] == "gemm" and "300 rows > 8" in plan.reason
    got = wg.ops.linear(dev.tensor(x), dev.tensor(w), dev.tensor(b)).numpy()
    exact = x.astype(np.float64) @ w.astype(np.float64).T + b
    assert got.shape == (3, 100, 50)
    _within(got, exact, x @ w.astype(np.float32).T + b, atol=1e-4)


def test_split_k_in_a_graph(dev, rng):
    """A split GEMM in a compiled graph: its scratch is placed by the memory plan, explain() says why."""
    w = rng.standard_normal((24, 64)).astype(np.float32)
    g = wg.Graph("gemm")
    gx = g.input("x", (20, 64), "f32")
    g.output("y", wg.ops.linear(gx, g.const("w", w), split_k=4))
    prog = g.compile(dev)
    assert [r.variant for r in prog.rows] == [dense.plan_linear(20, 24, 64, "f32", None, split_k=4).variant, "linear_gemm_sum"]
    assert "K in 4 slices of 16" in prog.explain(full=True)
    x = rng.standard_normal((20, 64)).astype(np.float32)
    _within(prog.run(x=x)["y"].numpy(), x.astype(np.float64) @ w.astype(np.float64).T, x @ w.T, atol=1e-4)


# ---- the planner's rule, on a fixed registry (the real numbers are tuning data) ----

RULE_REGISTRY = """
[matrix.linear_weight.f32]
output_dtype = "f32"
defines = { W_DT = "f32" }
vars = { wdt = "f32" }

[variants."skinny_{row}w"]
matrix = "linear_weight"
op = "linear"
file = "linear_gemm.wgsl"
entry = "main"
workgroup_size = [128]
defines = { ALIGN = "vec4", TILE_M = "32", TILE_N = "128", TILE_K = "16", THREAD_M = "4", THREAD_N = "8", K_UNROLL = "16", W_QUAD = "4" }
limits = { k_multiple = 4 }
weight_dtype = "{wdt}"
form = "gemm"
max_rows = 32
min_tiles = 1
fill_workgroups = 64
min_split_k = 256
max_splits = 16

[variants."big_{row}w"]
matrix = "linear_weight"
op = "linear"
file = "linear_gemm.wgsl"
entry = "main"
workgroup_size = [256]
defines = { ALIGN = "vec4", TILE_M = "128", TILE_N = "128", TILE_K = "16", THREAD_M = "8", THREAD_N = "8", K_UNROLL = "16", W_QUAD = "1" }
limits = { k_multiple = 4 }
weight_dtype = "{wdt}"
form = "gemm"
min_tiles = 100
fallback = true
fill_workgroups = 100
min_split_k = 256
max_splits = 16

[variants."small_{row}w"]
matrix = "linear_weight"
op = "linear"
file = "linear_gemm.wgsl"
entry = "main"
workgroup_size = [256]
defines = { ALIGN = "vec4", TILE_M = "64", TILE_N = "64", TILE_K = "16", THREAD_M = "4", THREAD_N = "4", K_UNROLL = "16", W_QUAD = "1" }
limits = { k_multiple = 4 }
weight_dtype = "{wdt}"
form = "gemm"
min_tiles = 50
fill_workgroups = 200
min_split_k = 256
max_splits = 4

[variants."any_{row}w"]
matrix = "linear_weight"
op = "linear"
file = "linear_gemm.wgsl"
entry = "main"
workgroup_size = [256]
defines = { ALIGN = "any", TILE_M = "64", TILE_N = "64", TILE_K = "16", THREAD_M = "4", THREAD_N = "4", K_UNROLL = "16", W_QUAD = "1" }
limits = { k_multiple = 1 }
weight_dtype = "{wdt}"
form = "gemm"
fallback = true
fill_workgroups = 0
min_split_k = 256
max_splits = 4
"""

# (rows, n, k) -> (variant, slices), worked out by hand from the numbers above: skinny for at most 32 rows, its K
# split while its 32x128 tiles are < 64, into at most k // 256 slices; else big when its 128x128 tiles number >= 100; else small when its 64x64 tiles number >= 50, its K split while its tiles are < 200, into at
# most 4 slices and at most k // 256, each a whole number of 16-deep steps; else big again (the fallback),
# split while < 100 workgroups into at most 16 slices; k % 4 != 0: any (fill 0: never split)
RULE_TABLE = {
    (4096, 2048, 2048): ("big_f32w", 1),      # 32 x 16 = 512 big tiles >= min_tiles and fill (100)
    (1280, 1280, 2048): ("big_f32w", 1),      # 10 x 10 = 100: both met exactly
    (1152, 1280, 2048): ("small_f32w", 1),    # 9 x 10 = 90 big tiles; 18 x 20 = 360 small >= fill 200
    (128, 2048, 2048): ("small_f32w", 4),     # 2 x 32 = 64 small tiles: min(4, 200 / 64 -> 4, 2048 // 256) = 4
    (128, 512, 2048): ("big_f32w", 8),        # 16 small tiles < 50: the fallback, 4 big tiles: min(16, 25, 8) = 8
    (128, 512, 512): ("big_f32w", 2),         # fallback, k // 256 = 2 slices of 256
    (128, 512, 300): ("big_f32w", 1),         # fallback, k // 256 = 1
    (128, 512, 800): ("big_f32w", 3),         # fallback, k // 256 = 3: 267 rounded to 272, 3 slices
    (256, 1600, 2048): ("small_f32w", 2),     # 2 x 13 = 26 big tiles; 4 x 25 = 100 small >= 50: min(4, 2, 8) = 2
    (256, 3072, 576): ("small_f32w", 2),      # 4 x 48 = 192 < 200: min(4, 2, 2) = 2 slices of 288
    (37, 3072, 576): ("big_f32w", 2),         # 48 small tiles < 50: the fallback, 24 big tiles: min(16, 5, 2) = 2
    (33, 8192, 2048): ("small_f32w", 2),      # 33 rows > skinny's 32; 64 big tiles; 128 small: min(4, 2, 8) = 2
    (32, 3072, 576): ("skinny_f32w", 2),      # 24 skinny tiles < 64: min(16, 3, 2) = 2 slices of 288
    (32, 8192, 2048): ("skinny_f32w", 1),     # 64 skinny tiles: fill met
    (9, 2048, 8192): ("skinny_f32w", 4),      # 16 tiles: min(16, 4, 32) = 4
    (32, 3072, 577): ("any_f32w", 1),         # k % 4 != 0: skinny loads 16 bytes, so element loads
    (37, 3072, 577): ("any_f32w", 1),         # k % 4 != 0: element loads; fill 0: never split
    (9, 7, 1): ("any_f32w", 1),
}


def _fixed_rule_registry(monkeypatch, tmp_path):
    (tmp_path / "gemm.toml").write_text(RULE_REGISTRY)
    fixed = load_registry(tmp_path, SHADER_DIR)
    monkeypatch.setattr(dense, "_gemm_kernels", lambda wdt: [kv for kv in fixed.values() if kv.facts["weight_dtype"] == wdt])
    return fixed


def test_plan_gemm_rule_against_a_table(monkeypatch, tmp_path):
    _fixed_rule_registry(monkeypatch, tmp_path)
    got = {shape: (p.variant, p.splits) for shape in RULE_TABLE
           for p in [dense.plan_gemm(*shape, "f32")]}
    assert got == RULE_TABLE


# WebGPU's default limits (16 KiB of workgroup memory, 256 threads): the 128x128 GEMM (16896 B) cannot run there,
# so the rule takes the next configuration that can; 32 KiB holds the 128x128 tile
SMALL_DEVICE_TABLE = {(512, 4096, 4096): ("linear_gemm_64x128_f32w", "linear_gemm_128x128_f32w"),
                      (64, 64, 64): ("linear_gemm_64x64_any_f32w", "linear_gemm_128x128_f32w"),
                      (20, 64, 64): ("linear_gemm_32x128_f32w", "linear_gemm_32x128_f32w")}


def test_plan_gemm_skips_configurations_the_device_cannot_run():
    webgpu, roomy = Caps.synthetic(), Caps.synthetic(max_workgroup_storage=32768)
    got = {shape: tuple(dense.plan_linear(*shape, "f32", caps).variant for caps in (webgpu, roomy))
           for shape in SMALL_DEVICE_TABLE}
    assert got == SMALL_DEVICE_TABLE
    assert "linear_gemm_128x128_f32w needs 16896 bytes of workgroup memory; the device has 16384" in \
        dense.plan_linear(64, 64, 64, "f32", webgpu).reason
    with pytest.raises(wg.LimitError,
                       match="linear_gemm_64x64_any_f32w needs 8704 bytes of workgroup memory; the device has 4096"):
        dense.plan_linear(64, 64, 64, "f32", Caps.synthetic(max_workgroup_storage=4096))


def test_a_16k_workgroup_memory_device_runs_the_gemm(dev, rng, monkeypatch):
    """On a device of WebGPU's default 16 KiB the planned GEMM runs (it raised LimitError at encoding when the
    planner took the 128x128 tile regardless of the device)."""
    monkeypatch.setattr(dev, "caps", attrs.evolve(dev.caps, max_workgroup_storage=16384))
    assert dense.plan_linear(64, 64, 64, "f32", dev.caps).variant == SMALL_DEVICE_TABLE[64, 64, 64][0]
    _check(dev, rng, 64, 64, 64, "f32", bias=True)


def test_registry_plans_every_shape():
    """The registry's last GEMM of each weight dtype takes any k and any tile count, so planning never fails;
    every configuration's tiles divide among its threads (the shader's const_asserts hold at load)."""
    for wdt in ("f32", "f16"):
        last = dense._gemm_kernels(wdt)[-1]
        assert last.limits["k_multiple"] == 1 and last.facts["fallback"] and "min_tiles" not in last.facts
    for rows, n, k in ((9, 1, 1), (4096, 128256, 2048), (37, 3072, 577), (1, 64, 36)):
        p = dense.plan_linear(rows, n, k, "f16", None)
        assert registry()[p.variant].facts.get("form") in ("gemm", "gemv") and p.reason


def test_forced_arguments_fail_before_any_gpu_work(dev, rng):
    x = dev.tensor(rng.standard_normal((9, 36)).astype(np.float32))
    w = dev.tensor(rng.standard_normal((5, 36)).astype(np.float32))
    y = dev.tensor(np.full((9, 5), 7.0, np.float32))
    before = dev.stats.snapshot()
    cases = [
        (dict(variant="nope"), wg.PlanError, "variant='nope' is not a linear kernel"),
        (dict(variant=3), wg.ArgumentError, "linear: variant=3 must be a str"),
        (dict(variant="linear_gemm_64x128_f16w"), wg.DtypeError, "takes f16 weights, W is f32"),
        (dict(variant="gemv_r8_f32"), wg.PlanError, "takes at most 8 rows"),
        (dict(variant="gemv_r8_f32", split_k=2), wg.PlanError, "split_k=2 needs a GEMM variant"),
        (dict(split_k=0), wg.ArgumentError, r"linear: split_k=0 must be an integer in \[1, 4294967295\] or None"),
        (dict(split_k=2.0), wg.ArgumentError, "split_k=2.0 must be an integer"),
        (dict(split_k=True), wg.ArgumentError, "split_k=True must be an integer"),
        (dict(split_k=17), wg.LimitError, r"split_k=17 must be in \[1, 16\]"),
    ]
    for kw, error, message in cases:
        with pytest.raises(error, match=message):
            wg.ops.linear(x, w, out=y, **kw)
    x37 = dev.tensor(rng.standard_normal((9, 37)).astype(np.float32))
    w37 = dev.tensor(rng.standard_normal((5, 37)).astype(np.float32))
    with pytest.raises(wg.ShapeError, match=r"needs in_features % 4 == 0 and > 0, got 37"):
        wg.ops.linear(x37, w37, variant="linear_gemm_64x128_f32w", out=y)
    assert dev.stats.since(before).dispatches == 0
    assert np.all(y.numpy() == 7.0)


def test_cpu_loop_cap_is_refused_or_split(dev):
    """lavapipe stops an invocation's loops after 65,535 iterations: unsplit, 65,536 slices of 16 sum 16
    ones short (measured), so they are refused when the dispatch is made; split in two they are planned."""
    if not dev.caps.is_cpu:
        pytest.skip("the loop cap is a CPU adapter's")
    k = 16 * 65536
    for split in (1, 2):
        g = wg.Graph("long_k")
        y = wg.ops.linear(g.input("x", (1, k), "f32"), g.input("w", (1, k), "f32"),
                          variant="linear_gemm_64x64_any_f32w", split_k=split)
        g.output("y", y)
        if split == 1:
            with pytest.raises(wg.LimitError, match="65536 loop iterations .* stops at 65535"):
                g.compile(dev)
        else:
            assert [r.variant for r in g.compile(dev).rows] == ["linear_gemm_64x64_any_f32w", "linear_gemm_sum"]


def test_empty_dimensions(dev):
    """No rows: an empty y and no dispatch; no input features: y is the bias (or zeros), 1..8 rows too."""
    b = np.arange(5, dtype=np.float32)
    for m, k in ((9, 0), (3, 0), (0, 36), (0, 0)):
        x, w = dev.tensor(np.ones((m, k), np.float32)), dev.tensor(np.ones((5, k), np.float32))
        before = dev.stats.snapshot()
        got = wg.ops.linear(x, w, dev.tensor(b)).numpy()
        assert got.shape == (m, 5) and np.array_equal(got, np.broadcast_to(b, (m, 5)))
        assert dev.stats.since(before).dispatches == (1 if m else 0)
        assert np.array_equal(wg.ops.linear(x, w).numpy(), np.zeros((m, 5), np.float32))


@pytest.mark.parametrize("wdtype", ["f32", "f16"])
def test_nan_and_inf_stay_where_float64_puts_them(dev, rng, wdtype):
    """A NaN in one row of x is NaN in that row's outputs only, an inf in x gives that row +-inf (NaN through
    the norm: inf / inf), an inf weight gives its output column +-inf (NaN where it meets a 0 in x): as float64
    numpy, in the GEMV (5 rows), 40 rows as planned (a CPU adapter's GEMV in passes of 32 rows, a GPU's GEMM), the
    GEMM (split_k=1) and the split GEMM, whose partial sums and clamped edge rows must not carry a row's NaN into
    another's."""
    skip_unless_f16(dev, wdtype)
    n, k = 9, 16
    for m, split in ((5, None), (40, None), (40, 1), (40, 3)):
        for norm in (None, np.ones(k, np.float32)):
            x = rng.standard_normal((m, k)).astype(np.float32)
            w = rng.standard_normal((n, k)).astype(np.float16 if wdtype == "f16" else np.float32)
            x[1, 5], x[m - 1, 2], x[0, 0] = np.nan, -np.inf, 0.0   # the last row: the GEMM's clamped edge rows
            w[n - 1, 3], w[2, 0] = np.inf, -np.inf                # w[2, 0] meets x[0, 0] = 0: NaN in row 0 only
            got = wg.ops.linear(dev.tensor(x), dev.tensor(w), norm=None if norm is None else dev.tensor(norm),
                                split_k=split).numpy()
            with np.errstate(all="ignore"):
                x64 = x.astype(np.float64)
                if norm is not None:
                    x64 = x64 / np.sqrt(np.mean(x64 * x64, -1, keepdims=True) + 1e-6)
                exact = x64 @ w.astype(np.float64).T
            finite = np.isfinite(exact)
            assert 0 < finite.sum() < exact.size and np.isnan(exact).any() and np.isinf(exact).any()
            assert np.array_equal(np.isnan(got), np.isnan(exact)), (m, split, norm is not None)
            assert np.array_equal(got[np.isinf(exact)], exact[np.isinf(exact)]), (m, split, norm is not None)
            assert np.allclose(got[finite], exact[finite], rtol=1e-5, atol=1e-4), (m, split, norm is not None)
