"""Elementwise ops from the one table (silu, gelu in both forms, softcap, mul, add with trailing-dims
broadcasting, swiglu, geglu in both forms) against float64 numpy, in f32 and f16, immediate, recorded and in a
graph; erf's error bound."""

import math

import numpy as np
import pytest

import wgraph as wg

F32_ULP = 2.0**-23


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _gelu(x):
    return 0.5 * x * np.vectorize(math.erfc)(-x / math.sqrt(2.0))  # = 0.5 x (1 + erf(x / sqrt 2)), no cancellation


def _gelu_tanh(x):
    """0.5 x (1 + tanh(u)) written as x * sigmoid(2u): equal, and float64's 1 + tanh(u) cancels at x << 0."""
    return x / (1.0 + np.exp(-2.0 * math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _gelu_tanh_slack(x, exact):
    """2x the error of the tanh form's own math in f32 numpy (sigmoid(2u) at x << 0 is as sensitive to u's
    rounding as exp(-2u) is: relative error 2|u| * 6e-8, whoever computes it), plus the error WGSL allows a
    GPU's exp(-2u), 3 + 2|2u| ULP (the NVIDIA driver uses it), which sigmoid passes on at most as large."""
    u = np.float32(2.0 * math.sqrt(2.0 / math.pi)) * (x + np.float32(0.044715) * x * x * x)
    with np.errstate(over="ignore"):
        formula = np.abs((x / (np.float32(1) + np.exp(-u))).astype(np.float64) - exact)
    return 2 * formula + (3 + 2 * np.abs(u.astype(np.float64))) * F32_ULP * np.abs(exact)


UNARY = [("silu", wg.ops.silu, _silu, None), ("gelu", wg.ops.gelu, _gelu, None),
         ("gelu_tanh", lambda x: wg.ops.gelu(x, approximate="tanh"), _gelu_tanh, _gelu_tanh_slack),
         ("softcap_30", lambda x: wg.ops.softcap(x, 30.0), lambda x: 30.0 * np.tanh(x / 30.0), None),
         ("softcap_0.5", lambda x: wg.ops.softcap(x, 0.5), lambda x: 0.5 * np.tanh(x / 0.5), None)]


def _inputs(rng, n=1000):
    x = rng.standard_normal(n) * 4
    return np.concatenate([x, [0.0, -1e-6, 1e-6, 30.0, -30.0, 100.0, -100.0]]).astype(np.float32)


@pytest.mark.parametrize("name,fn,ref,slack_of", UNARY, ids=[u[0] for u in UNARY])
def test_unary_f32(dev, rng, name, fn, ref, slack_of):
    x = _inputs(rng)
    got = fn(dev.tensor(x)).numpy().astype(np.float64)
    with np.errstate(over="ignore"):
        exact = ref(x.astype(np.float64))
    # f32 math with a few roundings (exp, erfc's fit to 1.2e-7): relative, down to the f32 underflow
    # (results below 1e-36 may flush to zero); plus the formula's own slack where it has one
    slack = 0.0 if slack_of is None else slack_of(x, exact)
    assert np.all(np.abs(got - exact) <= 8 * F32_ULP * np.abs(exact) + slack + 1e-36), \
        float(np.max(np.abs(got - exact) / (np.abs(exact) + 1e-36)))


@pytest.mark.parametrize("name,fn,ref,slack_of", UNARY, ids=[u[0] for u in UNARY])
def test_unary_f16(dev, rng, name, fn, ref, slack_of):
    if not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    x = _inputs(rng, 300).clip(-60000, 60000).astype(np.float16)
    got = fn(dev.tensor(x)).numpy()
    assert got.dtype == np.float16
    with np.errstate(over="ignore"):
        exact = ref(x.astype(np.float64))
    # f32 math rounded once to f16: within one f16 ulp (half-ulp rounding plus the f32 error), or a subnormal step
    assert np.all(np.abs(got - exact) <= np.abs(exact) * 2.0**-10 + 2.0**-24)


def test_erf_error_bound(dev):
    """The shader's Phi(x) = (1 + erf(x / sqrt 2)) / 2 = gelu(x) / x, on a dense grid down to the deep tail,
    against math.erf (and math.erfc where 1 + erf cancels in float64 too): within 8 f32 ulp, relative."""
    x = np.concatenate([np.linspace(-12, 8, 20000), [1e-3, -1e-3]]).astype(np.float32)  # no 0: phi = gelu / x
    x64 = x.astype(np.float64)
    phi = wg.ops.gelu(dev.tensor(x)).numpy().astype(np.float64) / x64
    exact = np.where(x64 > -1, 0.5 * (1.0 + np.vectorize(math.erf)(x64 / math.sqrt(2.0))),
                     0.5 * np.vectorize(math.erfc)(-x64 / math.sqrt(2.0)))
    assert np.max(np.abs(phi - exact) / exact) < 8 * F32_ULP


def test_scale_keeps_its_behaviour(dev, rng):
    x = rng.standard_normal(37).astype(np.float32)
    got = wg.ops.scale(dev.tensor(x), -1.25).numpy()
    assert got.tobytes() == (x * np.float32(-1.25)).tobytes()  # one f32 multiply: exact as numpy's


def test_scale_factor_that_f32_cannot_hold_is_refused(dev):
    """A factor below f32's smallest normal is 0 (or a subnormal a GPU may flush) in the uniform: scale(1e30,
    1e-50) gave 0, not 1e-20. It is refused; 0 and f32's smallest normal (either sign) still scale exactly."""
    x = dev.tensor(np.array([1e30, -2.0], np.float32))
    for bad in (1e-50, -1e-40):
        with pytest.raises(wg.ArgumentError, match=r"scale: factor=-?1e-[45]0 must be 0 or a finite real of magnitude"):
            wg.ops.scale(x, bad)
    tiny = float(np.finfo(np.float32).tiny)
    np.testing.assert_array_equal(wg.ops.scale(x, -tiny).numpy(), np.array([1e30, -2.0], np.float32) * np.float32(-tiny))
    np.testing.assert_array_equal(wg.ops.scale(x, 0.0).numpy(), [0.0, -0.0])


def test_scale_by_negative_zero_does_not_depend_on_an_earlier_call():
    """An op call's template is found by its params, where -0.0 == 0.0: scale(x, -0.0) took the factor of whichever
    of the two a process used first (its zeros' signs followed the call before). -0.0 is 0.0 now, in either order
    (a fresh device each, so no earlier call's template is there: a device's templates are its own, dev.templates;
    this was a fresh process each, ~1.9 s of Python start, registry load and device a run)."""
    want = np.signbit(np.array([1.0, -2.0], np.float32) * np.float32(0.0)).tolist()   # [False, True]
    for order in ((0.0, -0.0), (-0.0, 0.0)):
        dev = wg.Device()
        try:
            assert len(dev.templates) == 0
            x = dev.tensor(np.array([1.0, -2.0], np.float32))
            assert [np.signbit(wg.ops.scale(x, f).numpy()).tolist() for f in order] == [want, want], order
        finally:
            dev.destroy()


@pytest.mark.parametrize("a_shape,b_shape",
                         [((5, 7), (5, 7)), ((6, 33), (33,)), ((2, 3, 4), (3, 4)), ((3, 1, 5), (1, 5))])
@pytest.mark.parametrize("op", ["add", "mul"])
def test_binary_broadcast_f32(dev, rng, op, a_shape, b_shape):
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = np.asarray(rng.standard_normal(b_shape)).astype(np.float32)
    got = getattr(wg.ops, op)(dev.tensor(a), dev.tensor(b)).numpy()
    ref = {"add": np.add, "mul": np.multiply}[op](a, b)   # one f32 op: correctly rounded, so equal bytes
    assert got.shape == a_shape and got.tobytes() == ref.tobytes()


def test_binary_f16(dev, rng):
    if not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    a = rng.standard_normal((3, 8)).astype(np.float16)
    b = rng.standard_normal(8).astype(np.float16)
    for op, ref in (("add", np.add), ("mul", np.multiply)):
        got = getattr(wg.ops, op)(dev.tensor(a), dev.tensor(b)).numpy()
        # f32 math of two f16 values is exact; one rounding to f16 equals numpy's f16 op
        assert got.tobytes() == ref(a.astype(np.float64), b.astype(np.float64)).astype(np.float16).tobytes()


def test_binary_errors(dev):
    a = dev.tensor(np.ones((2, 4), np.float32))
    with pytest.raises(wg.ShapeError, match=r"mul: shapes \(2, 4\) and \(2,\) do not broadcast"):
        wg.ops.mul(a, dev.tensor(np.ones(2, np.float32)))
    with pytest.raises(wg.ShapeError, match=r"add: shapes \(2, 4\) and \(3, 2, 4\) do not broadcast"):
        wg.ops.add(a, dev.tensor(np.ones((3, 2, 4), np.float32)))
    with pytest.raises(wg.DtypeError, match="mul: dtypes f32 and u32 differ"):
        wg.ops.mul(a, dev.tensor(np.ones(4, np.uint32)))
    with pytest.raises(wg.ShapeError, match=r"swiglu: x must be \[\.\.\., 2 \* n\].*\(2, 5\)"):
        wg.ops.swiglu(dev.tensor(np.ones((2, 5), np.float32)))
    with pytest.raises(wg.ArgumentError, match="gelu: approximate='erf' must be one of 'none', 'tanh'"):
        wg.ops.gelu(a, approximate="erf")
    with pytest.raises(wg.DtypeError, match="silu has no kernel for .*u32"):
        wg.ops.silu(dev.tensor(np.ones(4, np.uint32)))


def test_softcap_across_its_range(dev):
    """cap * tanh(x / cap) within 8 f32 ulp relative from the tiniest x to saturation (both branches of
    tanh_accurate, the polynomial's edge at |x / cap| = 0.625, and e^2|x| overflowing to inf). A cap of 1e10 puts
    x / cap below f32's smallest normal for x < 1.2e-28, which a GPU may flush to 0 (softcap(x) was 0 there)."""
    x = np.concatenate([np.geomspace(1e-30, 1e6, 2000), np.linspace(1.8, 1.95, 200)]).astype(np.float32)
    x = np.concatenate([x, -x, [0.0, np.float32(np.finfo(np.float32).max)]]).astype(np.float32)
    for cap in (3.0, 50.0, 1e10):
        got = wg.ops.softcap(dev.tensor(x), cap).numpy().astype(np.float64)
        exact = cap * np.tanh(x.astype(np.float64) / cap)
        assert np.all(np.abs(got - exact) <= 8 * F32_ULP * np.abs(exact) + 1e-38), \
            float(np.max(np.abs(got - exact) / (np.abs(exact) + 1e-38)))
    with pytest.raises(wg.ArgumentError, match=r"softcap: cap=0\.0 must be a finite real in \[1\.1754944e-38, 3\.4028235e\+38\]"):
        wg.ops.softcap(dev.tensor(x), 0.0)
    # a cap below f32's smallest normal is 0 (or a subnormal a GPU may flush) in the uniform: softcap(0, 1e-50)
    # was 0 / 0 = NaN
    for bad in (float("inf"), float("nan"), -1.0, True, "3", 1e-50, 1e-45):
        with pytest.raises(wg.ArgumentError, match="softcap: cap=.* must be a finite real"):
            wg.ops.softcap(dev.tensor(x), bad)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_softcap_keeps_nan(dev, dtype):
    """softcap(NaN) is NaN and softcap(+-inf) is +-cap in every dtype (tanh_accurate took sign(NaN), 0 on
    lavapipe: a NaN logit came out as 0.0)."""
    if dtype == "f16" and not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 1.0, -2.0], np.float32)
    t = dev.tensor(x, dtype=dtype) if dtype == "bf16" else dev.tensor(x.astype(np.float16 if dtype == "f16" else np.float32))
    for cap in (30.0, 1e-30):
        got = wg.ops.softcap(t, cap).numpy().astype(np.float64)
        assert np.isnan(got[:2]).all(), got
        assert got[2] == np.float32(cap) if dtype == "f32" else np.isclose(got[2], cap, rtol=2**-7), got
        assert got[3] == -got[2] and np.isfinite(got[4:]).all()


def _flushes_subnormals(dev) -> bool:
    """Does the device flush f32 subnormals to zero in arithmetic (Vulkan allows it: the H100 does, lavapipe does
    not)? 1e-39 * 1 is 1e-39 where subnormals are kept."""
    return float(wg.ops.scale(dev.tensor(np.array([1e-39], np.float32)), 1.0).numpy()[0]) == 0


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_gelu_far_tail_is_zero(dev, dtype):
    """gelu(x) = x * Phi(x) is 0 in f32 for x below about -14.4 (Phi(-15) = 3.7e-51): the erf form clamped |x| to
    14, where Phi is 7.8e-45 (a subnormal, not 0), so gelu(-1e30) was -8.4e-15, gelu(-3e38) -2.5e-6 and gelu(-inf)
    -inf. Now they are -0 (geglu's gate alike), and -inf gives NaN, -inf * 0, as silu and the tanh form do."""
    if dtype == "f16" and not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    x = np.array([-15.0, -20.0, -100.0, -6.5e4, -1e30, -3e38, -np.inf, np.inf, np.nan], np.float32)
    if dtype == "f16":
        x = x[[0, 1, 2, 3, 6, 7, 8]].astype(np.float16)
    t = dev.tensor(x, dtype=dtype) if dtype == "bf16" else dev.tensor(x)
    got = wg.ops.gelu(t).numpy().astype(np.float64)
    finite = np.isfinite(x)
    assert (got[finite] == 0).all(), got
    assert np.isnan(got[np.isneginf(x)]).all() and np.isnan(got[np.isnan(x)]).all(), got
    assert (got[np.isposinf(x)] == np.inf).all(), got
    # in geglu, gelu(gate) * up: a far negative gate gives 0 whatever up is
    up = np.full_like(x, 1e6 if dtype != "f16" else 6e4)
    halves = np.stack([x, up])[None].reshape(1, -1)
    h = dev.tensor(halves, dtype=dtype) if dtype == "bf16" else dev.tensor(halves)
    gg = wg.ops.geglu(h).numpy().astype(np.float64)[0]
    assert (gg[finite] == 0).all() and np.isnan(gg[~finite & ~np.isposinf(x)]).all(), gg
    # just above the cut, Phi(-14) is a subnormal f32 keeps, and gelu(-14) is float64's -1.09e-43 (within a few of
    # the subnormals' steps of 1.4e-45, which the erf's intermediates round to), or -0 / 0 on a device that flushes
    # subnormals to zero (Vulkan allows it; the H100 does)
    if dtype == "f32":
        got = float(wg.ops.gelu(dev.tensor(np.array([-14.0], np.float32))).numpy()[0])
        want = -14.0 * 0.5 * math.erfc(14.0 / math.sqrt(2.0))
        assert got == 0 if _flushes_subnormals(dev) else got < 0 and abs(got - want) <= 0.15 * abs(want), got
    # silu and the tanh form (docs/errors.md, elementwise-nonfinite): -inf and NaN give NaN, +inf gives +inf
    for op in (wg.ops.silu, lambda v: wg.ops.gelu(v, approximate="tanh")):
        got = op(t).numpy().astype(np.float64)
        assert np.isnan(got[~finite & ~np.isposinf(x)]).all() and (got[np.isposinf(x)] == np.inf).all(), got


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_geglu_halves(dev, rng, approximate):
    """geglu(x) = gelu(gate) * up over x's two halves, as gelu(first half) * second half in float64."""
    x = np.concatenate([rng.standard_normal((5, 24)) * 4, np.full((1, 24), -30.0)]).astype(np.float32)
    got = wg.ops.geglu(dev.tensor(x), approximate=approximate).numpy().astype(np.float64)
    gate, up = x[:, :12], x[:, 12:].astype(np.float64)
    with np.errstate(over="ignore"):
        exact_gate = (_gelu if approximate == "none" else _gelu_tanh)(gate.astype(np.float64))
        slack = 0.0 if approximate == "none" else _gelu_tanh_slack(gate, exact_gate) * np.abs(up)
    exact = exact_gate * up
    assert got.shape == (6, 12)
    assert np.all(np.abs(got - exact) <= 9 * F32_ULP * np.abs(exact) + slack + 1e-36)
    # the same as gelu then mul
    sep = wg.ops.mul(wg.ops.gelu(dev.tensor(x[:, :12].copy()), approximate=approximate),
                     dev.tensor(x[:, 12:].copy())).numpy()
    assert got.astype(np.float32).tobytes() == sep.tobytes()
    with pytest.raises(wg.ArgumentError, match="geglu: approximate='erf' must be one of 'none', 'tanh'"):
        wg.ops.geglu(dev.tensor(x), approximate="erf")


def test_swiglu_fused_gate_up(dev, rng):
    """One linear over stacked [gate; up] weights, then swiglu = silu(gate) * up, equals the unfused math."""
    x = rng.standard_normal((3, 16)).astype(np.float32)
    w_gate = rng.standard_normal((10, 16)).astype(np.float32) * 0.3
    w_up = rng.standard_normal((10, 16)).astype(np.float32) * 0.3
    gu = wg.ops.linear(dev.tensor(x), dev.tensor(np.concatenate([w_gate, w_up])))
    got = wg.ops.swiglu(gu).numpy().astype(np.float64)
    x64 = x.astype(np.float64)
    g, u = x64 @ w_gate.T.astype(np.float64), x64 @ w_up.T.astype(np.float64)
    exact = _silu(g) * u
    assert got.shape == (3, 10)
    assert np.all(np.abs(got - exact) <= 1e-5 * (np.abs(exact) + np.abs(u) + 1))
    # and it is silu(first half) * second half of the same buffer, as the two separate ops give it
    gu_np = gu.numpy()
    sep = wg.ops.mul(wg.ops.silu(dev.tensor(gu_np[:, :10].copy())), dev.tensor(gu_np[:, 10:].copy())).numpy()
    assert got.astype(np.float32).tobytes() == sep.tobytes()


def test_recorded_and_graph_equal_immediate(dev, rng):
    x = rng.standard_normal((4, 12)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)

    def chain(t, b):
        h = wg.ops.swiglu(wg.ops.gelu(t, approximate="tanh"))
        return wg.ops.mul(wg.ops.add(wg.ops.silu(h), b), h)

    immediate = chain(dev.tensor(x), dev.tensor(bias)).numpy()
    before = dev.stats.snapshot()
    with dev.record():
        rec = chain(dev.tensor(x), dev.tensor(bias))
    assert dev.stats.since(before).submits == 1
    g = wg.Graph("ew")
    g.output("y", chain(g.input("x", (4, 12), "f32"), g.const("bias", bias)))
    out = g.compile(dev).run(x=x)["y"].numpy()
    assert rec.numpy().tobytes() == immediate.tobytes() == out.tobytes()
    x64 = x.astype(np.float64)
    h = _silu(_gelu_tanh(x64[:, :6])) * _gelu_tanh(x64[:, 6:])
    np.testing.assert_allclose(immediate, (_silu(h) + bias) * h, rtol=1e-5, atol=1e-6)


def test_a_numpy_string_is_a_choice_as_its_str(dev):
    """np.str_('tanh') (a str subclass, as numpy hands back from an array of names) was refused by
    `approximate`'s choice rule, which took only type(value) is str; it selects the tanh form, as 'tanh' does
    (against the float64 tanh formula), and a numpy 'f32' names the dtype. A numpy 'erf' is still refused."""
    x = np.linspace(-3, 3, 16, dtype=np.float32)
    got = wg.ops.gelu(dev.tensor(x), approximate=np.str_("tanh")).numpy().astype(np.float64)
    exact = _gelu_tanh(x.astype(np.float64))
    assert np.all(np.abs(got - exact) <= _gelu_tanh_slack(x, exact) + 1e-7)
    assert np.abs(got - _gelu(x.astype(np.float64))).max() > 1e-4   # the tanh form, not the erf one
    assert dev.empty((2,), np.str_("f32")).dtype == "f32"
    with pytest.raises(wg.ArgumentError, match=r"gelu: approximate=np.str_\('erf'\) must be one of 'none', 'tanh'"):
        wg.ops.gelu(dev.tensor(x), approximate=np.str_("erf"))


def test_indirect_of_the_wrong_dtype_or_size_names_the_op(dev):
    """indirect= is u32 workgroup counts: an f32 or i32 one was a ShapeError ('indirect args must be ...') naming no
    op; now a wrong dtype is the DtypeError every other tensor argument raises, too few values the ShapeError, both
    naming the op, before any GPU work. Counts past the data write only the tensor's elements (x * 2, as numpy)."""
    x = np.arange(-5, 5, dtype=np.float32)
    t = dev.tensor(x)
    before = dev.stats.snapshot()
    with pytest.raises(wg.DtypeError, match=r"scale: indirect must be a u32 tensor .* got f32 \(3,\)"):
        wg.ops.scale(t, 2.0, indirect=dev.tensor(np.ones(3, np.float32)))
    with pytest.raises(wg.DtypeError, match=r"add: indirect must be a u32 tensor .* got i32 \(4,\)"):
        wg.ops.add(t, t, indirect=dev.tensor(np.ones(4, np.int32)))
    with pytest.raises(wg.ShapeError, match=r"mul: indirect must hold at least 3 values .* got u32 \(2,\)"):
        wg.ops.mul(t, t, indirect=dev.tensor(np.ones(2, np.uint32)))
    assert dev.stats.since(before).dispatches == 0
    got = wg.ops.scale(t, 2.0, indirect=dev.tensor(np.array([100, 1, 1], np.uint32))).numpy()
    assert got.tolist() == (x.astype(np.float64) * 2).tolist()


def test_indirect_counts_cover_elements_as_documented(dev, rng):
    """docs/ops.md, "Indirect dispatch": 256 elements a workgroup (bf16 512), element i in workgroup i // 256 at
    (w % x, w // x). Counts [2, 2, 1] cover 1024 elements, [2, 1, 1] the first 512; a count past the device's
    limit is skipped by WebGPU without an error: the output keeps its bytes (the documented hazard)."""
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    t = dev.tensor(x)
    counts = lambda c: dev.tensor(np.array(c, np.uint32))   # noqa: E731
    out = dev.tensor(np.full(n, -7.0, np.float32))
    assert wg.ops.scale(t, 2.0, indirect=counts([2, 2, 1]), out=out).numpy().tolist() == (x * 2.0).tolist()
    out = dev.tensor(np.full(n, -7.0, np.float32))
    got = wg.ops.scale(t, 2.0, indirect=counts([2, 1, 1]), out=out).numpy()
    assert got[:512].tolist() == (x[:512] * 2.0).tolist() and (got[512:] == -7.0).all()
    if dev.caps.max_workgroups_per_dim == 65535:
        out = dev.tensor(np.full(n, -7.0, np.float32))
        assert (wg.ops.scale(t, 2.0, indirect=counts([65536, 1, 1]), out=out).numpy() == -7.0).all()


def test_sigmoid_tails_where_sigmoid_is_subnormal(dev):
    """x * sigmoid(y) is a normal f32 where sigmoid(y) is subnormal (y < -87; it was cut to 0 below -88): silu(-89) =
    -1.98e-37 and the tanh form's gelu(-10.05) = -3.9e-38 came out -0. Now within 8 ulp relative there (silu, swiglu,
    the tanh gelu); -inf and NaN stay NaN, and far below (-150.5, -1e30) the result underflows to 0."""
    x = np.array([-87.5, -88.2, -88.7, -89.0, -90.0, -91.5], np.float32)
    exact = _silu(x.astype(np.float64))
    for got in (wg.ops.silu(dev.tensor(x)).numpy(),
                wg.ops.swiglu(dev.tensor(np.concatenate([x, np.ones_like(x)])[None])).numpy()[0]):
        assert np.all(np.abs(got - exact) <= 8 * F32_ULP * np.abs(exact)), (got, exact)
    edge = wg.ops.silu(dev.tensor(np.array([-np.inf, np.nan, -150.5, -1e30, -87.0], np.float32))).numpy()
    assert np.isnan(edge[:2]).all() and np.all(edge[2:4] == 0)
    assert abs(edge[4] - _silu(-87.0)) <= 8 * F32_ULP * abs(_silu(-87.0))
    xt = np.array([-10.0, -10.05, -10.1, -10.125], np.float32)          # 2u from -87.6 to -90.3
    exact = _gelu_tanh(xt.astype(np.float64))
    got = wg.ops.gelu(dev.tensor(xt), approximate="tanh").numpy()
    assert np.all(np.abs(got - exact) <= 2 * _gelu_tanh_slack(xt, exact)), (got, exact)
