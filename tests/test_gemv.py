"""`linear` for 1..8 rows (the GEMV of registry/gemv.toml) and its fused options against float64 numpy: RMSNorm
prologue, bias, swiglu and residual epilogue, each weight dtype, odd sizes; the variants without subgroups,
the row-group candidates (forced) and the tiled GEMM's unfused path compute the same; one dispatch per fused
call (dev.stats); the plan is the first registry variant whose facts take the call. Bound: the kernel's error
is at most 2x that of the same math done in f32 numpy, plus an atol."""

import attrs
import numpy as np
import pytest

import wgraph as wg
from wgraph.device import Caps
from wgraph.kernels.registry import kernel, kernels_for, registry
from wgraph.ops.dense import plan_linear
from kernel_support import skip_unless_f16, skip_unless_runs
from linear_reference import fused_linear_reference

NP = {"f32": np.float32, "f16": np.float16}


def _check(got, x, w, b, norm, residual, swiglu, eps=1e-5):
    exact = fused_linear_reference(x, w, b, norm, residual, swiglu, eps, np.float64)
    same_f32 = fused_linear_reference(x, w, b, norm, residual, swiglu, eps, np.float32)
    assert got.shape == exact.shape and got.dtype == np.float32
    err = np.abs(got.astype(np.float64) - exact)
    bound = 2 * np.abs(same_f32.astype(np.float64) - exact) + 1e-5 * np.sqrt(x.shape[-1]) * (1 + np.abs(exact))
    assert np.all(err <= bound), float(np.max(err - bound))


def _case(rng, m, n, k, wdtype, *, norm, bias, swiglu, residual):
    x = (rng.standard_normal((m, k)) * 2).astype(np.float32)
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(NP[wdtype])
    out = n // 2 if swiglu else n
    return dict(x=x, w=w, b=rng.standard_normal(n).astype(np.float32) if bias else None,
                norm=(1 + 0.2 * rng.standard_normal(k)).astype(np.float32) if norm else None,
                residual=rng.standard_normal((m, out)).astype(np.float32) if residual else None, swiglu=swiglu)


def _run(dev, c, variant=None, eps=1e-5, split_k=None):
    t = {key: dev.tensor(c[key]) if c[key] is not None else None for key in ("x", "w", "b", "norm", "residual")}
    return wg.ops.linear(t["x"], t["w"], t["b"], norm=t["norm"], eps=eps, residual=t["residual"],
                         activation="swiglu" if c["swiglu"] else None, variant=variant, split_k=split_k).numpy()


# rows 1..8, odd output features, k a multiple of the 16-byte load with an unroll tail; each option alone and
# all together; long rows (k >= 4096) and a wide output (n >= 8192) reach their own registry variants
CASES = [
    (1, 37, 1032, "f32", dict(norm=False, bias=True, swiglu=False, residual=False)),
    (1, 38, 136, "f16", dict(norm=True, bias=False, swiglu=True, residual=False)),
    (2, 9, 64, "f16", dict(norm=False, bias=False, swiglu=False, residual=True)),
    (3, 34, 136, "f32", dict(norm=True, bias=True, swiglu=True, residual=True)),
    (4, 5, 1048, "f16", dict(norm=True, bias=False, swiglu=False, residual=False)),
    (5, 17, 40, "f32", dict(norm=False, bias=True, swiglu=False, residual=True)),
    (6, 6, 8, "f16", dict(norm=True, bias=True, swiglu=True, residual=True)),
    (7, 11, 264, "f32", dict(norm=False, bias=False, swiglu=False, residual=False)),
    (8, 22, 1040, "f16", dict(norm=True, bias=True, swiglu=True, residual=True)),
    (1, 7, 4104, "f16", dict(norm=True, bias=False, swiglu=False, residual=True)),
    (1, 8194, 64, "f16", dict(norm=True, bias=True, swiglu=True, residual=True)),
    (3, 9, 4112, "f32", dict(norm=True, bias=True, swiglu=False, residual=True)),      # 2..8 rows, long
    (8, 14, 4104, "f16", dict(norm=True, bias=True, swiglu=True, residual=True)),
    (5, 8200, 64, "f16", dict(norm=True, bias=False, swiglu=True, residual=True)),     # 2..8 rows, wide f16
]


@pytest.mark.parametrize("m,n,k,wdtype,opts", CASES)
def test_fused_linear_gemv(dev, rng, m, n, k, wdtype, opts):
    """The call as planned on this device, and (forced, where it differs: a CPU adapter plans its own class) as a
    GPU plans it, so the GPU classes run here too."""
    skip_unless_f16(dev, wdtype)
    c = _case(rng, m, n, k, wdtype, **opts)
    plan = plan_linear(m, n, k, wdtype, dev.caps, swiglu=opts["swiglu"], norm=opts["norm"],
                       residual=opts["residual"])
    assert plan.variant.startswith("gemv_") and plan.steps == ("matmul",)
    before = dev.stats.snapshot()
    got = _run(dev, c)
    assert dev.stats.since(before).dispatches == 1  # norm, bias, swiglu and residual fused into the GEMV
    _check(got, c["x"], c["w"], c["b"], c["norm"], c["residual"], c["swiglu"])
    gpu = plan_linear(m, n, k, wdtype, SUBGROUPS, swiglu=opts["swiglu"], norm=opts["norm"],
                      residual=opts["residual"]).variant
    assert (gpu == plan.variant) == (not dev.caps.is_cpu or not kernel(plan.variant).facts.get("cpu_only"))
    if gpu != plan.variant:
        skip_unless_runs(dev, gpu)
        _check(_run(dev, c, variant=gpu), c["x"], c["w"], c["b"], c["norm"], c["residual"], c["swiglu"])


@pytest.mark.parametrize("variant,m,n,k,wdtype", [("gemv_r1_wg_f16", 1, 38, 72, "f16"),
                                                  ("gemv_r8_wg_f32", 7, 18, 40, "f32")])
def test_gemv_without_subgroups(dev, rng, variant, m, n, k, wdtype):
    """The workgroup-memory variants (devices without subgroups), forced here, with every option."""
    skip_unless_f16(dev, wdtype)
    assert "subgroup" not in kernel(variant).features
    for swiglu in (False, True):
        c = _case(rng, m, n, k, wdtype, norm=True, bias=True, swiglu=swiglu, residual=True)
        _check(_run(dev, c, variant=variant), c["x"], c["w"], c["b"], c["norm"], c["residual"], swiglu)


# the row-group core (threads of a slot share each weight load, each taking max_rows / row_groups rows of x;
# prefetched loads, 1 and 2 steps with a tail), forced: the planned 8-row classes (f16: 2 groups, long rows 4;
# f32: 1 group, long rows 2, not prefetched; wide f16 8 weight rows a slot and 4 on wide long rows, not prefetched)
# and the workgroup-memory candidate (4 groups); rows that fill one group or all; each option alone and together
@pytest.mark.parametrize("variant,groups,prefetch,m,n,k,opts", [
    ("gemv_r8_f16", 2, 1, 8, 14, 1040, dict(norm=True, bias=True, swiglu=True, residual=True)),
    ("gemv_r8_f32", 1, 0, 3, 9, 268, dict(norm=True, bias=False, swiglu=False, residual=False)),
    ("gemv_r8_wide_f16", 2, 0, 1, 10, 72, dict(norm=False, bias=True, swiglu=False, residual=False)),
    ("gemv_r8_wide_f16", 2, 0, 8, 12, 136, dict(norm=True, bias=True, swiglu=True, residual=True)),
    ("gemv_r8_wide_long_f16", 2, 0, 5, 8, 264, dict(norm=True, bias=False, swiglu=True, residual=True)),
    ("gemv_r8_long_f16", 4, 1, 6, 22, 40, dict(norm=False, bias=False, swiglu=True, residual=False)),
    ("gemv_r8_long_f16", 4, 1, 7, 9, 520, dict(norm=True, bias=True, swiglu=False, residual=True)),
    ("gemv_r8_long_f32", 2, 0, 5, 13, 264, dict(norm=True, bias=True, swiglu=True, residual=True)),
    ("gemv_r8_groups_wg_f32", 4, 1, 7, 18, 100, dict(norm=True, bias=True, swiglu=True, residual=True)),
    ("gemv_r8_groups_wg_f16", 4, 1, 2, 11, 392, dict(norm=False, bias=False, swiglu=False, residual=True)),
])
def test_gemv_row_groups(dev, rng, variant, groups, prefetch, m, n, k, opts):
    assert kernel(variant).limits["row_groups"] == groups and kernel(variant).limits["prefetch"] == prefetch
    skip_unless_runs(dev, variant)   # the planned classes sum by subgroups
    skip_unless_f16(dev, variant.rsplit("_", 1)[1])
    c = _case(rng, m, 2 * n if opts["swiglu"] else n, k, variant.rsplit("_", 1)[1], **opts)
    _check(_run(dev, c, variant=variant), c["x"], c["w"], c["b"], c["norm"], c["residual"], c["swiglu"])


@pytest.mark.parametrize("m,k", [(11, 40), (1, 36)])  # more rows than a GEMV takes; f16 rows not 16-byte aligned
def test_unfused_path_matches(dev, rng, m, k):
    """The tiled GEMM runs the options as dispatches of their own (rmsnorm, matmul, swiglu, add)."""
    skip_unless_f16(dev)
    c = _case(rng, m, 14, k, "f16", norm=True, bias=True, swiglu=True, residual=True)
    plan = plan_linear(m, 14, k, "f16", dev.caps, swiglu=True, norm=True, residual=True)
    assert plan.variant.startswith("linear_gemm_") and plan.steps == ("rmsnorm", "matmul", "swiglu", "add")
    before = dev.stats.snapshot()
    got = _run(dev, c)
    assert dev.stats.since(before).dispatches == 4
    _check(got, c["x"], c["w"], c["b"], c["norm"], c["residual"], True)


@pytest.mark.parametrize("m,n,k,wdtype,opts", [
    (11, 14, 40, "f16", dict(norm=True, bias=True, swiglu=True, residual=True)),
    (33, 38, 264, "f32", dict(norm=False, bias=False, swiglu=True, residual=False)),
    (9, 17, 72, "f32", dict(norm=False, bias=True, swiglu=False, residual=True)),
    (20, 6, 36, "f16", dict(norm=True, bias=False, swiglu=False, residual=False)),
])
def test_split_gemm_sum_applies_swiglu_and_residual(dev, rng, m, n, k, wdtype, opts):
    """A GEMM whose K is cut into slices: its summing pass adds the bias and applies swiglu and the residual, so
    the call is the norm (when there is one), the GEMM and the summing pass; odd sizes, f16 k not 16-byte aligned."""
    skip_unless_f16(dev, wdtype)
    c = _case(rng, m, n, k, wdtype, **opts)
    plan = plan_linear(m, n, k, wdtype, dev.caps, swiglu=opts["swiglu"], norm=opts["norm"],
                       residual=opts["residual"], split_k=3)
    assert plan.splits == 3 and plan.steps == (("rmsnorm",) if opts["norm"] else ()) + ("matmul",)
    epilogue = [step for step, option in (("swiglu", "swiglu"), ("add", "residual")) if opts[option]]
    assert ("summing pass that applies " + ", ".join(epilogue) in plan.reason) == bool(epilogue), plan.reason
    before = dev.stats.snapshot()
    got = _run(dev, c, split_k=3)
    assert dev.stats.since(before).dispatches == 2 + opts["norm"]
    _check(got, c["x"], c["w"], c["b"], c["norm"], c["residual"], c["swiglu"])


def _first_match(rows, n, k, wdtype, caps, swiglu):
    """The planning rule of registry/gemv.toml, read off the registry facts: the first GEMV variant whose
    limits and speed rules take the call."""
    for kv in kernels_for("linear"):
        lim, f = kv.limits, kv.facts
        if f.get("form") != "gemv" or f["weight_dtype"] != wdtype or not set(kv.features) <= caps.features:
            continue
        if f.get("cpu_only") and not caps.is_cpu:
            continue
        if kv.workgroup_memory > caps.max_workgroup_storage or k % lim["k_multiple"]:
            continue
        if rows > lim["max_rows"] and not f.get("row_passes"):  # a prefill class takes any rows, in passes
            continue
        if swiglu and (lim["features_per_lane"] % 2 or n % lim["features_per_lane"]):
            continue
        if k >= f["min_k"] and n >= f["min_n"]:
            return kv.name
    return None


SUBGROUPS = Caps.synthetic(has_subgroups=True, max_workgroup_storage=32768)
PLAIN = Caps.synthetic()
CPU = attrs.evolve(SUBGROUPS, is_cpu=True)


@pytest.mark.parametrize("caps", [SUBGROUPS, PLAIN, attrs.evolve(SUBGROUPS, max_workgroup_storage=4096), CPU],
                         ids=["subgroups", "plain", "small-workgroup-memory", "cpu"])
def test_plan_is_the_first_registry_match(caps):
    seen = set()
    for rows in (1, 2, 8) + ((9, 32, 33, 300) if caps.is_cpu else ()):
        for n, k in ((512, 2048), (2048, 2048), (3072, 2048), (16384, 2048), (2048, 8192), (128256, 4096),
                     (14336, 4096), (4096, 14336), (38, 72)):
            for wdtype in ("f32", "f16"):
                for swiglu in (False, True):
                    want = _first_match(rows, n, k, wdtype, caps, swiglu)
                    if want is None and caps.max_workgroup_storage == 4096:  # no GEMM fits 4 KiB either
                        with pytest.raises(wg.LimitError, match="needs .* bytes of workgroup memory; the device has 4096"):
                            plan_linear(rows, n, k, wdtype, caps, swiglu=swiglu)
                        seen.add("LimitError")
                        continue
                    p = plan_linear(rows, n, k, wdtype, caps, swiglu=swiglu)
                    if want is None:  # no GEMV takes it: the GEMM
                        assert registry()[p.variant].facts["form"] == "gemm", (rows, n, k, wdtype, swiglu)
                    else:
                        assert p.variant == want, (rows, n, k, wdtype, swiglu)
                    assert (f"{rows} rows <=" in p.reason or f"{rows} rows in " in p.reason) == (want is not None)
                    seen.add(p.variant)
    if caps.max_workgroup_storage == 4096:  # no 8-row GEMV fits, nor any GEMM: those calls are refused
        assert "LimitError" in seen and not any(v.startswith(("gemv_r8", "linear_gemm_")) for v in seen)
    if caps is PLAIN:
        assert seen == {"gemv_r1_wg_f32", "gemv_r1_wg_f16", "gemv_r8_wg_f32", "gemv_r8_wg_f16"}
    if caps is SUBGROUPS:  # the wide f16 outputs' two classes (8 weight rows a slot; 4 on wide long rows)
        assert {"gemv_r8_wide_f16", "gemv_r8_wide_long_f16"} <= seen
        assert not any(kernel(v).facts.get("cpu_only") for v in seen if v.startswith("gemv_"))
    if caps is CPU:  # a CPU adapter's own classes (a prompt's rows in passes of 32), the GPU's where swiglu's pairs
        # do not fit 8 rows a slot, the GEMM where k is not a multiple of a GEMV's load
        assert {"gemv_r1_cpu_f32", "gemv_r1_cpu_f16", "gemv_r8_cpu_f32", "gemv_r8_cpu_f16", "gemv_r1_f16",
                "gemv_r32_cpu_f32", "gemv_r32_cpu_f16"} <= seen
        assert any(v.startswith("linear_gemm_") for v in seen)


def test_cpu_classes_are_planned_only_on_a_cpu_adapter(dev, rng):
    """gemv_r1_cpu / gemv_r8_cpu (registry fact cpu_only) take a CPU adapter's calls, say why not on a GPU, and run
    anywhere when forced, with every option."""
    assert plan_linear(1, 64, 64, "f32", CPU).variant == "gemv_r1_cpu_f32"
    assert plan_linear(1, 64, 64, "f32", CPU).reason.startswith("1 rows <= 1 (a CPU adapter): GEMV")
    assert plan_linear(1, 64, 64, "f32", SUBGROUPS).variant == "gemv_r1_f32"
    assert plan_linear(5, 64, 64, "f32", CPU).variant == "gemv_r8_cpu_f32"
    assert [plan_linear(m, 64, 64, "f32", CPU).variant for m in (9, 32, 33, 300)] == ["gemv_r32_cpu_f32"] * 4
    assert plan_linear(33, 64, 64, "f32", CPU).reason.startswith("33 rows in 2 passes of 32 (a CPU adapter): GEMV")
    assert plan_linear(300, 64, 64, "f32", CPU).reason.startswith("300 rows in 10 passes of 32")
    assert plan_linear(33, 64, 64, "f32", SUBGROUPS).reason.startswith("33 rows > 8 (a GEMV's most): GEMM")
    assert plan_linear(9, 64, 64, "f32", SUBGROUPS).variant.startswith("linear_gemm_")
    from wgraph.ops import gemv
    assert gemv.refusal(kernel("gemv_r1_cpu_f32"), gemv.GemvShape(1, 64, 64, "f32"), SUBGROUPS) == \
        "is for CPU adapters"
    for variant, m in (("gemv_r1_cpu_f32", 1), ("gemv_r8_cpu_f32", 8), ("gemv_r8_cpu_f32", 3), ("gemv_r32_cpu_f32", 9),
                       ("gemv_r32_cpu_f32", 32), ("gemv_r32_cpu_f32", 33), ("gemv_r32_cpu_f32", 97)):
        skip_unless_runs(dev, variant)
        c = _case(rng, m, 2 * 24, 72, "f32", norm=True, bias=True, swiglu=True, residual=True)
        before = dev.stats.snapshot()
        got = _run(dev, c, variant=variant)
        # a pass of up to 32 rows of x a dispatch: each pass's rows of y from its own rows of x and residual
        assert dev.stats.since(before).dispatches == (-(-m // 32) if "r32" in variant else 1)
        _check(got, c["x"], c["w"], c["b"], c["norm"], c["residual"], True)


def test_walk_drops_its_row_test_only_where_a_dispatch_serves_every_row():
    """ALL_ROWS (gemv_core.wgsl) compiles out the walk's per-step test of each row of x: set for a dispatch of
    exactly max_rows rows of a class of several (8 of 8; a full pass of 32), clear for fewer (the last pass of
    33) and in one-row classes (measured slower without their test: ops/gemv.py)."""
    from wgraph.ops import gemv
    want = {("gemv_r1_f16", 1): [False], ("gemv_r1_cpu_f32", 1): [False], ("gemv_r8_f16", 8): [True],
            ("gemv_r8_f16", 5): [False],
            ("gemv_r32_cpu_f32", 32): [True], ("gemv_r32_cpu_f32", 33): [True, False],
            ("gemv_r32_cpu_f32", 97): [True, True, True, False], ("gemv_r32_cpu_f32", 9): [False]}
    for (variant, m), flags in want.items():
        kv, s = kernel(variant), gemv.GemvShape(m, 64, 64, variant.rsplit("_", 1)[1])
        got = [gemv.walk_constants(kv, gemv.pass_rows(kv, s, p * kv.limits["max_rows"]), norm=None)
               for p in range(gemv.row_passes(kv, s))]
        assert got == [{"HAS_NORM": False, "ALL_ROWS": f} for f in flags], (variant, m)


def test_size_rules_refuse_below_min_k_and_min_n_unless_forced():
    """A GEMV class whose registry fact min_k / min_n the call's W is below is passed over with the side named
    (plain and quantized planners); a forced call skips the rule."""
    from wgraph.ops import gemv, quantized
    long_ = next(k for k in kernels_for("linear") if k.facts.get("min_k", 0) > 1 and "max_rows" in k.limits)
    wide = next(k for k in kernels_for("linear") if k.facts.get("min_n", 0) > 1 and "max_rows" in k.limits)
    dt = long_.facts["weight_dtype"]
    small_k = gemv.GemvShape(1, 64, long_.facts["min_k"] - 8, dt)
    assert gemv.refusal(long_, small_k, None) == f"is for in_features >= {long_.facts['min_k']}"
    assert gemv.refusal(long_, small_k, None, forced=True) is None
    small_n = gemv.GemvShape(1, wide.facts["min_n"] - 8, 64, wide.facts["weight_dtype"])
    assert gemv.refusal(wide, small_n, None) == f"is for out_features >= {wide.facts['min_n']}"
    q = next(k for k in kernels_for("linear_q") if k.facts.get("min_k", 0) > 1)
    assert quantized._refusal(q, 64, q.facts["min_k"] - 32, False, None, False) == \
        f"is for in_features >= {q.facts['min_k']}"
    assert quantized._refusal(q, 64, q.facts["min_k"] - 32, False, None, True) is None


def test_plan_falls_back_to_tiled_and_says_why():
    p = plan_linear(9, 64, 64, "f32", SUBGROUPS)
    assert p.variant.startswith("linear_gemm_") and "9 rows > 8" in p.reason
    p = plan_linear(1, 64, 36, "f16", SUBGROUPS, norm=True, residual=True)
    assert p.variant.startswith("linear_gemm_") and "a multiple of 8" in p.reason and "rmsnorm, add as dispatches" in p.reason
    assert p.steps == ("rmsnorm", "matmul", "add")


def test_forced_variant_errors(dev):
    skip_unless_f16(dev)   # f16 weights
    x = dev.tensor(np.ones((2, 64), np.float32))
    w = dev.tensor(np.ones((8, 64), np.float16))
    with pytest.raises(wg.PlanError, match="takes at most 1 rows"):
        wg.ops.linear(x, w, variant="gemv_r1_f16")
    with pytest.raises(wg.DtypeError, match="takes f32 weights"):
        wg.ops.linear(x, w, variant="gemv_r8_f32")
    with pytest.raises(wg.PlanError, match="swiglu needs an even features_per_lane"):
        wg.ops.linear(dev.tensor(np.ones((1, 64), np.float32)), dev.tensor(np.ones((6, 64), np.float16)),
                      activation="swiglu", variant="gemv_r8_wide_f16")  # 8 weight rows per slot: 6 is no multiple
    with pytest.raises(wg.PlanError, match="'rmsnorm_f32' is not a linear kernel"):
        wg.ops.linear(x, w, variant="rmsnorm_f32")


def test_gemv_past_a_cpu_adapters_loop_cap_is_refused(dev):
    """lavapipe stops an invocation's loops at 65535 iterations, silently: forced gemv_r8_groups_wg_f32 (8 lanes
    split a weight row, 2 loads of 4 a step) over 4,500,000 features walks 70,313 steps per lane, and a row of
    ones summed to 4194336, not 4.5e6. A forced GEMV past a CPU adapter's cap is now a LimitError (as a forced
    GEMM's) and the planner passes over it; on a GPU the forced variant sums the row."""
    k = 4_500_000
    x, w = dev.tensor(np.ones((1, k), np.float32)), dev.tensor(np.ones((1, k), np.float32))
    if dev.caps.is_cpu:
        with pytest.raises(wg.LimitError, match=r"gemv_r8_groups_wg_f32 cannot take 1 rows of W \[1, 4500000\] f32: "
                                                r"it loops \d+ times per invocation for in_features 4500000; .* stops "
                                                r"an invocation's loops at 65535"):
            wg.ops.linear(x, w, variant="gemv_r8_groups_wg_f32")
    else:
        assert wg.ops.linear(x, w, variant="gemv_r8_groups_wg_f32").numpy().tolist() == [[4.5e6]]
    assert wg.ops.linear(x, w).numpy().tolist() == [[4.5e6]]  # integers below 2^24: exact in f32


def test_fused_linear_errors(dev):
    x = dev.tensor(np.ones((2, 16), np.float32))
    w = dev.tensor(np.ones((6, 16), np.float32))
    with pytest.raises(wg.ShapeError, match=r"norm weight must be f32 \(16,\)"):
        wg.ops.linear(x, w, norm=dev.tensor(np.ones(8, np.float32)))
    with pytest.raises(wg.ShapeError, match=r"residual must be f32 \(2, 3\)"):
        wg.ops.linear(x, w, activation="swiglu", residual=dev.tensor(np.ones((2, 6), np.float32)))
    with pytest.raises(wg.ArgumentError, match="linear: activation='gelu' must be one of None, 'swiglu'"):
        wg.ops.linear(x, w, activation="gelu")
    with pytest.raises(wg.ShapeError, match="swiglu' needs W"):
        wg.ops.linear(x, dev.tensor(np.ones((5, 16), np.float32)), activation="swiglu")
    with pytest.raises(wg.ArgumentError, match=r"linear: eps=0.0 must be a finite real in \[1.1754944e-38, "):
        wg.ops.linear(x, w, norm=dev.tensor(np.ones(16, np.float32)), eps=0.0)
    with pytest.raises(wg.ArgumentError, match="linear: eps='1e-5' must be a finite real"):
        wg.ops.linear(x, w, eps="1e-5")
    with pytest.raises(wg.AliasingError):
        r = dev.tensor(np.ones((2, 6), np.float32))
        wg.ops.linear(x, w, residual=r, out=r)



@pytest.mark.parametrize("rows", [2, 9])   # the GEMV and the GEMM
def test_fused_option_of_another_dtype_is_a_dtype_error(dev, rows):
    """A norm weight or residual of the right shape in f16 is a DtypeError, as an f16 bias is (it was a ShapeError,
    which named no wrong shape); of a wrong shape it stays a ShapeError. linear_rope_kv_append's norm too."""
    skip_unless_f16(dev, why="the wrong options are f16 tensors")
    x = dev.tensor(np.ones((rows, 16), np.float32))
    w = dev.tensor(np.ones((6, 16), np.float32))
    with pytest.raises(wg.DtypeError, match=r"linear: bias must be f32, got f16"):
        wg.ops.linear(x, w, dev.tensor(np.ones(6, np.float16)))
    with pytest.raises(wg.DtypeError, match=r"linear: norm weight must be f32 \(16,\) for W \(6, 16\), got f16 "
                                            r"\(16,\)"):
        wg.ops.linear(x, w, norm=dev.tensor(np.ones(16, np.float16)))
    with pytest.raises(wg.DtypeError, match=rf"linear: residual must be f32 \({rows}, 3\) \(the output's shape\), "
                                            rf"got f16 \({rows}, 3\)"):
        wg.ops.linear(x, w, activation="swiglu", residual=dev.tensor(np.ones((rows, 3), np.float16)))
    with pytest.raises(wg.ShapeError, match=r"linear: norm weight must be f32 \(16,\) for W \(6, 16\), got f16 \(8,\)"):
        wg.ops.linear(x, w, norm=dev.tensor(np.ones(8, np.float16)))
    cos, sin = (dev.tensor(t) for t in wg.ops.rope_tables(16, 2))
    cache = (dev.tensor(np.zeros((16, 1, 2), np.float32)), dev.tensor(np.zeros((16, 1, 2), np.float32)))
    with pytest.raises(wg.DtypeError, match=r"linear_rope_kv_append: linear: norm weight must be f32 \(16,\)"):
        wg.ops.linear_rope_kv_append(x, w, cos, sin, cache, 0, q_heads=1, norm=dev.tensor(np.ones(16, np.float16)))

def test_gemv_recorded_and_in_a_graph(dev, rng):
    """Decode-shaped fused linears recorded in one submit and replayed from a graph: the same bytes as
    immediate, one dispatch each, and right against float64."""
    skip_unless_f16(dev)
    c = _case(rng, 4, 24, 72, "f16", norm=True, bias=True, swiglu=True, residual=True)
    g = wg.Graph("gemv")
    gx = g.input("x", (4, 72), "f32")
    gr = g.input("r", (4, 12), "f32")
    y = wg.ops.linear(gx, g.const("w", c["w"]), g.const("b", c["b"]), norm=g.const("n", c["norm"]), eps=1e-5,
                      activation="swiglu", residual=gr)
    g.output("y", y)
    prog = g.compile(dev)
    assert [r.variant for r in prog.rows] == [plan_linear(4, 24, 72, "f16", dev.caps, swiglu=True).variant]
    text = prog.explain(full=True)
    assert "4 rows <= 8" in text and ": GEMV, " in text
    before = dev.stats.snapshot()
    with dev.record():
        y1 = wg.ops.linear(dev.tensor(c["x"]), dev.tensor(c["w"]), dev.tensor(c["b"]), norm=dev.tensor(c["norm"]),
                           eps=1e-5, activation="swiglu", residual=dev.tensor(c["residual"]))
    assert dev.stats.since(before).submits == 1
    got = y1.numpy()
    _check(got, c["x"], c["w"], c["b"], c["norm"], c["residual"], True)
    assert prog.run(x=c["x"], r=c["residual"])["y"].numpy().tobytes() == got.tobytes()


def test_empty_weights(dev):
    """W with no rows gives an empty output; W with no columns gives the bias (the tiled GEMM takes both)."""
    x = dev.tensor(np.ones((2, 8), np.float32))
    assert wg.ops.linear(x, dev.tensor(np.ones((0, 8), np.float32))).numpy().shape == (2, 0)
    b = np.arange(3, dtype=np.float32)
    got = wg.ops.linear(dev.tensor(np.ones((2, 0), np.float32)), dev.tensor(np.ones((3, 0), np.float32)), dev.tensor(b))
    assert np.array_equal(got.numpy(), np.stack([b, b]))
    assert registry()[plan_linear(1, 0, 8, "f32", SUBGROUPS).variant].facts["form"] == "gemm"


@pytest.mark.parametrize("variant", ["gemv_r8_f32", "gemv_r1_wg_f32"])
def test_forced_gemv_of_no_rows(dev, variant):
    """A forced GEMV given 0 rows of x: an empty y and no dispatch, as the planned call (the GEMM) gives; it
    dispatched with x's 4-byte stand-in bound where the GEMV reads vec4s (a wgpu validation error)."""
    skip_unless_runs(dev, variant)
    x, w = dev.tensor(np.ones((0, 16), np.float32)), dev.tensor(np.ones((6, 16), np.float32))
    before = dev.stats.snapshot()
    got = wg.ops.linear(x, w, dev.tensor(np.ones(6, np.float32)), norm=dev.tensor(np.ones(16, np.float32)),
                        variant=variant).numpy()
    assert got.shape == (0, 6) and dev.stats.since(before).dispatches == 0
    assert np.array_equal(wg.ops.linear(dev.tensor(np.ones((1, 16), np.float32)), w, variant=variant).numpy(),
                          np.full((1, 6), 16.0, np.float32))   # the device still runs work after it
