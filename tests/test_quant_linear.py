"""linear on GGML-quantized weights (Q8_0, Q4_0, Q4_1, Q4_K): the GEMV reading the raw blocks against the
float64 product of the weights as the `gguf` package dequantizes them, plain and with its fused options
(RMSNorm prologue, bias, swiglu, residual: one dispatch); block layouts against gguf's table; QuantizedWeight's
checks; the plan against the registry's data; a graph with block states."""

import attrs
import gguf
import numpy as np
import pytest
from gguf.quants import dequantize as gguf_dequantize

import wgraph as wg
from wgraph.bench.quant import random_blocks
from wgraph.device import Caps
from wgraph.ggml_blocks import FORMATS, QuantizedWeight, quantize, stack_rows
from wgraph.ggml_quantizers import quantize_q4_k
from wgraph.kernels.registry import kernel, kernels_for
from wgraph.ops.quantized import plan_linear_q
from kernel_support import cannot_run, skip_unless_runs
from linear_reference import fused_linear_reference

TYPES = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS",
         "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M")


def reference(x: np.ndarray, qw: QuantizedWeight, bias=None):
    """(x @ W.T + b in float64 with W as gguf dequantizes the blocks, the sum of |x| |W| for the tolerance)."""
    w = gguf_dequantize(qw.raw(), gguf.GGMLQuantizationType[qw.ggml_type]).astype(np.float64)
    y = x.astype(np.float64) @ w.T
    if bias is not None:
        y = y + bias
    return y, np.abs(x.astype(np.float64)) @ np.abs(w).T


def check(got, x, qw, bias=None):
    want, scale = reference(x, qw, bias)
    # f32 products summed in f32: a few ulps of the sum of magnitudes; one wrong weight of K is ~1/K of it
    np.testing.assert_array_less(np.abs(got - want), 2e-6 * scale + 1e-6)


def test_block_layouts_match_gguf():
    """Every format's size and type number as gguf has them; every quantized kernel's layout as FORMATS says."""
    for name, fmt in FORMATS.items():
        t = gguf.GGMLQuantizationType[name]
        assert int(t) == fmt.ggml_type
        assert gguf.constants.GGML_QUANT_SIZES[t] == (fmt.block_weights, fmt.block_bytes)
    kernels = kernels_for("linear_q") + kernels_for("embedding_q")
    assert {kv.facts["ggml_type"] for kv in kernels} == set(FORMATS)
    for kv in kernels:
        fmt = FORMATS[kv.facts["ggml_type"]]
        assert (kv.limits["block_weights"], kv.limits["block_bytes"]) == (fmt.block_weights, fmt.block_bytes), kv.name


@pytest.mark.parametrize("ggml_type", TYPES)
def test_gemv_odd_sizes_and_rows(dev, rng, ggml_type):
    """in_features of 1, 2, 3 and 7 blocks; out_features no multiple of a workgroup's features; 1, 2, 5, 8 rows
    (the GEMV) and 11 (two chunks of 8); with and without bias."""
    bw = FORMATS[ggml_type].block_weights
    for blocks, n, m in ((1, 13, 1), (2, 7, 2), (3, 9, 5), (7, 21, 8), (3, 5, 11), (1, 1, 3)):
        k = blocks * bw
        w = rng.standard_normal((n, k)).astype(np.float32)
        qw = quantize(w, ggml_type)
        x = rng.standard_normal((m, k)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32) if m % 2 else None
        for variant in _planned_and_gpu(dev, m, n, k, ggml_type):
            got = wg.ops.linear(dev.tensor(x), qw.upload(dev), None if bias is None else dev.tensor(bias),
                                variant=variant).numpy()
            assert got.shape == (m, n)
            check(got, x, qw, bias)


def _planned_and_gpu(dev, m, n, k, ggml_type, swiglu=False) -> list:
    """None (the call as this device plans it) and, where a GPU plans another GEMV (a CPU adapter plans its own
    class), that variant forced, so the GPU classes run here too."""
    here = plan_linear_q(m, n, k, ggml_type, swiglu=swiglu, caps=dev.caps).variant
    gpu = plan_linear_q(m, n, k, ggml_type, swiglu=swiglu, caps=SUBGROUPS).variant
    return [None] if gpu == here or cannot_run(dev, gpu) else [None, gpu]


def test_gemv_keeps_leading_dims_writes_out_and_takes_no_rows(dev, rng):
    qw = quantize(rng.standard_normal((6, 64)).astype(np.float32), "Q4_0")
    x = rng.standard_normal((2, 3, 64)).astype(np.float32)
    out = dev.empty((2, 3, 6), "f32")
    assert wg.ops.linear(dev.tensor(x), qw.upload(dev), out=out) is out
    check(out.numpy().reshape(6, 6), x.reshape(6, 64), qw)
    assert wg.ops.linear(dev.tensor(np.zeros((0, 64), np.float32)), qw.upload(dev)).numpy().shape == (0, 6)


def _fused_case(rng, ggml_type, m, n, blocks, *, norm, bias, swiglu, residual):
    """A call's inputs: W quantized from random weights, or, past 2^20 weights (the wide case), random valid blocks
    (the bench's: the grid formats' quantizers search 256-2048 entries a group of weights, seconds at that size)."""
    k = blocks * FORMATS[ggml_type].block_weights
    if n * k > 2**20:
        qw = random_blocks(ggml_type, n, k, rng)
    else:
        qw = quantize((rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32), ggml_type)
    out = n // 2 if swiglu else n
    return dict(x=(rng.standard_normal((m, k)) * 2).astype(np.float32), qw=qw,
                b=rng.standard_normal(n).astype(np.float32) if bias else None,
                norm=(1 + 0.2 * rng.standard_normal(k)).astype(np.float32) if norm else None,
                residual=rng.standard_normal((m, out)).astype(np.float32) if residual else None, swiglu=swiglu)


def _fused_run(dev, c, variant=None, eps=1e-5, x_int8=False):
    t = {key: dev.tensor(c[key]) if c[key] is not None else None for key in ("x", "b", "norm", "residual")}
    return wg.ops.linear(t["x"], c["qw"].upload(dev), t["b"], norm=t["norm"], eps=eps, residual=t["residual"],
                         activation="swiglu" if c["swiglu"] else None, variant=variant, x_int8=x_int8).numpy()


def _fused_check(got, c, eps=1e-5):
    """At most 2x the error of the same math in f32 numpy (gguf's dequantized weights), plus an atol."""
    args = (c["x"], gguf_dequantize(c["qw"].raw(), gguf.GGMLQuantizationType[c["qw"].ggml_type]), c["b"], c["norm"],
            c["residual"], c["swiglu"], eps)
    exact = fused_linear_reference(*args, np.float64)
    same_f32 = fused_linear_reference(*args, np.float32)
    assert got.shape == exact.shape and got.dtype == np.float32
    err = np.abs(got.astype(np.float64) - exact)
    bound = 2 * np.abs(same_f32.astype(np.float64) - exact) + 1e-5 * np.sqrt(c["x"].shape[-1]) * (1 + np.abs(exact))
    assert np.all(err <= bound), float(np.max(err - bound))


# rows 1..8 and 11 (two chunks of 8); odd blocks per row; out_features no multiple of a workgroup's rows, an odd
# half with swiglu, and >= 8192 (the wide variant); each option alone and all together
FUSED_CASES = [
    (1, 37, 3, dict(norm=True, bias=False, swiglu=False, residual=False)),
    (1, 38, 2, dict(norm=False, bias=True, swiglu=True, residual=False)),
    (3, 21, 1, dict(norm=False, bias=False, swiglu=False, residual=True)),
    (8, 26, 3, dict(norm=True, bias=True, swiglu=True, residual=True)),
    (11, 18, 2, dict(norm=True, bias=True, swiglu=True, residual=True)),
    (1, 8194, 1, dict(norm=True, bias=True, swiglu=True, residual=True)),
]


@pytest.mark.parametrize("ggml_type", TYPES)
def test_fused_options_in_one_dispatch(dev, rng, ggml_type):
    for m, n, blocks, opts in FUSED_CASES:
        c = _fused_case(rng, ggml_type, m, n, blocks, **opts)
        k = blocks * FORMATS[ggml_type].block_weights
        for variant in _planned_and_gpu(dev, m, n, k, ggml_type, opts["swiglu"]):
            before = dev.stats.snapshot()
            got = _fused_run(dev, c, variant=variant)
            assert dev.stats.since(before).dispatches == 1, (m, n, opts)  # norm, bias, swiglu, residual fused
            _fused_check(got, c)


def test_every_gemv_reads_w_from_the_blocks_buffer():
    """The package's GEMVs load W's words (quant_words_buffer.wgsl); the words made in registers are only the
    compute-only bound of benchmarks/quant_ab.py, which builds its twins in a copy of the registry."""
    for kv in kernels_for("linear_q"):
        assert "return blocks[i];" in kv.source and "return heads[i];" in kv.source, kv.name
        assert "0x9E3779B9u" not in kv.source, kv.name


F32_TINY = 2.0 ** -126  # f32's smallest normal


def _i8_steps(m: np.ndarray) -> np.ndarray:
    """The x_int8 step of blocks whose largest |x| is m: m / 127, and 2^-126 for m below 255 * 2^-127 (a step below
    f32's normal range reads as 0 on a device that flushes subnormals: quant_i8_round.wgsl)."""
    return np.where(m < 255 * 2.0 ** -127, F32_TINY, m.astype(np.float64) / 127)


def _x_rounded(x: np.ndarray) -> np.ndarray:
    """x as an x_int8 GEMV rounds it (quant_i8_round.wgsl): per row of x and run of 32 weights, step = max |x| / 127
    (2^-126 at least) and x = step * round(x / step), in f32 as the kernel computes them."""
    blocks = x.astype(np.float32).reshape(x.shape[0], -1, 32)
    m = np.abs(blocks).max(axis=2, keepdims=True)
    tiny = m < np.float32(255 * 2.0 ** -127)
    inv = np.where(tiny, np.float32(2.0 ** 126), np.float32(127) / np.where(tiny, 1, m)).astype(np.float32)
    q = np.round(blocks * inv)
    step = np.where(tiny, np.float32(F32_TINY), m * np.float32(1 / 127)).astype(np.float64)
    return (q.astype(np.float64) * step).reshape(x.shape)


def _int8_check(got, c, eps=1e-5):
    """An x_int8 GEMV (no swiglu: its epilogue is the f32 readers') against float64 with x (after the norm
    weight) rounded as the kernel rounds it and the 1 / rms of the unrounded x; a value on a rounding tie may
    round the other way (one step of one x)."""
    assert not c["swiglu"]
    x, norm = c["x"].astype(np.float32), c["norm"]
    xn = x * norm if norm is not None else x
    w = gguf_dequantize(c["qw"].raw(), gguf.GGMLQuantizationType[c["qw"].ggml_type]).astype(np.float64)
    y = _x_rounded(xn) @ w.T
    scale = 1 / np.sqrt(np.mean(x.astype(np.float64) ** 2, -1, keepdims=True) + eps) if norm is not None else 1.0
    exact = y * scale
    if c["b"] is not None:
        exact = exact + c["b"]
    if c["residual"] is not None:
        exact = exact + c["residual"]
    one_step = np.abs(xn).max() / 127 * np.abs(w).max() * np.max(scale)
    err = np.abs(got.astype(np.float64) - exact)
    assert np.all(err <= 1e-5 * np.sqrt(x.shape[-1]) * (1 + np.abs(exact)) + one_step), float(np.max(err))
    plain = fused_linear_reference(c["x"], w, c["b"], norm, c["residual"], c["swiglu"], eps, np.float64)
    assert np.max(np.abs(got - plain)) > 1e-6 * np.max(np.abs(plain))  # x was rounded: not the float sum


def test_every_gemv_variant_forced(dev, rng):
    """Each shipped GEMV kernel (tuning candidates and the variants without subgroups included) on one odd shape
    with every option, as many rows as it holds plus one (two chunks): 48 features (24 with swiglu: divisible by
    every features_per_lane, 1 to 16), 2 blocks of the K-quants (16 of the 32-weight formats). A variant with an odd
    features_per_lane refuses swiglu by name. The x_int8 variants against x rounded as they round it. (Their
    pipelines, norm compiled in, are compiled side by side first: PipelineCache.warm.) The rows' second chunk is
    partial (the step's per-row test compiled in: ALL_ROWS off; test_fused_options_in_one_dispatch's 8 rows run
    the planned 8-row classes with it on)."""
    from wgraph.ops.gemv import walk_constants
    # those the device can run (a device without subgroups runs the _wg_ variants only)
    runnable = [kv for kv in kernels_for("linear_q") if cannot_run(dev, kv.name) is None]
    dev.pipelines.warm([kv.specialized(walk_constants(kv, kv.limits["max_rows"] + 1, norm=True)) for kv in runnable])
    for kv in runnable:
        t = kv.facts["ggml_type"]
        blocks = 2 if FORMATS[t].block_weights == 256 else 16
        pairs = kv.limits["features_per_lane"] % 2 == 0
        int8 = kv.facts.get("x_int8", False)
        c = _fused_case(rng, t, kv.limits["max_rows"] + 1, 48, blocks, norm=True, bias=True, swiglu=pairs and not int8,
                        residual=True)
        if int8:
            _int8_check(_fused_run(dev, c, variant=kv.name), c)
        else:
            _fused_check(_fused_run(dev, c, variant=kv.name), c)
        if not pairs:
            c = _fused_case(rng, t, 1, 48, blocks, norm=False, bias=False, swiglu=True, residual=False)
            with pytest.raises(wg.PlanError, match=f"forced variant {kv.name} swiglu needs an even features_per_lane"):
                _fused_run(dev, c, variant=kv.name)


def test_gemv_past_a_cpu_adapters_loop_cap_is_refused(dev):
    """lavapipe stops an invocation's loops at 65535 iterations, silently: 2 rows of x = W = ones(3407872) in Q5_0
    planned quant_gemv_r8_long (16 lanes whole blocks: 6656 steps of 512 weights, each copying the 8 rows' x to the
    stage in 8 trips of 128 threads, ~9 x 6656 iterations) and summed to 419456, not 3407872. A GEMV past a CPU
    adapter's cap is now passed over (the one-row GEMV in two chunks takes it: 3328 steps of 3) and a forced one is a
    LimitError; on a GPU the forced variant sums the rows."""
    k = 3_407_872
    qw = quantize(np.ones((1, k), np.float32), "Q5_0").upload(dev)  # d = 1/16, quants 0: exactly 1
    x = dev.tensor(np.ones((2, k), np.float32))
    assert wg.ops.linear(x, qw).numpy().tolist() == [[k], [k]]  # integers below 2^24: exact in f32
    if dev.caps.is_cpu:
        with pytest.raises(wg.LimitError, match=r"forced variant quant_gemv_r8_long_q5_0 loops \d+ times per "
                                                r"invocation for in_features 3407872; .* stops an invocation's loops "
                                                r"at 65535"):
            wg.ops.linear(x, qw, variant="quant_gemv_r8_long_q5_0")
    else:
        assert wg.ops.linear(x, qw, variant="quant_gemv_r8_long_q5_0").numpy().tolist() == [[k], [k]]


def test_cpu_loop_count_of_a_staged_gemv_is_refused_past_the_cap():
    """The planner's loop count against a hand count of quant_gemv_r1_q8_0 (workgroups of 256, 32 lanes each
    reading whole 34-byte blocks, x staged one step at a time): a step is 32 blocks (1024 weights), one pass of the
    walk plus a stage copy of 256 vectors (one trip of the 256 threads and its exit test): 3 iterations a step, so
    22000 steps (66000) pass the cap and 21000 (63000 and the sums' few hundred) do not. A CPU adapter refuses the
    longer rows and a GPU takes them."""
    cpu = Caps.synthetic(has_subgroups=True, max_workgroup_storage=32768, is_cpu=True)
    gpu = Caps.synthetic(has_subgroups=True, max_workgroup_storage=32768)
    assert plan_linear_q(1, 16, 21000 * 1024, "Q8_0", caps=cpu).variant == "quant_gemv_r1_q8_0"
    k = 22000 * 1024
    assert plan_linear_q(1, 16, k, "Q8_0", caps=gpu).variant == "quant_gemv_r1_q8_0"
    with pytest.raises(wg.PlanError, match=r"quant_gemv_r1_q8_0.* loops \d+ times per invocation for in_features "
                                           rf"{k}; 'synthetic' \(a CPU adapter\) stops an invocation's loops at 65535"):
        plan_linear_q(1, 16, k, "Q8_0", caps=cpu)
    with pytest.raises(wg.LimitError, match="forced variant quant_gemv_r1_q8_0 loops"):
        plan_linear_q(1, 16, k, "Q8_0", "quant_gemv_r1_q8_0", caps=cpu)


def test_staged_readers_stage_x_over_several_steps(dev, rng):
    """The GEMVs whose lanes read whole blocks stage x (and norm_w) in workgroup memory stage_steps steps at
    a time: rows of 2 * stage_steps * (blocks a step) + 3 blocks (two whole stages and a partial step in a third;
    odd and even blocks, whose quant words start mid-word and on a word), as many rows of x as the kernel holds,
    with the norm and a residual, out_features no multiple of a workgroup's rows; the kernels that load a step
    ahead (prefetch) and those that round x to int8 as they stage it (x_int8: against x rounded so) among them."""
    staged = [kv for kv in kernels_for("linear_q") if kv.const("STAGE_X")]
    assert {(kv.facts["ggml_type"], kv.limits["lanes_per_block"]) for kv in staged} == {
        ("Q4_0", 1), ("Q8_0", 1), ("Q4_1", 1), ("Q5_0", 1), ("Q5_1", 1), ("IQ4_NL", 1), ("IQ4_XS", 8),
        ("IQ2_XXS", 8), ("IQ2_XS", 8), ("IQ2_S", 8), ("IQ3_XXS", 8), ("IQ3_S", 8),
        ("IQ1_S", 8), ("IQ1_M", 8), ("Q4_K", 8), ("Q5_K", 8), ("Q6_K", 8), ("Q3_K", 8), ("Q2_K", 8)}
    assert {(kv.limits["stage_steps"], kv.limits["prefetch"]) for kv in staged} >= {(1, 0), (4, 1)}
    for kv in staged:
        if cannot_run(dev, kv.name):   # the subgroup readers on a device without subgroups
            continue
        per_step = kv.limits["lanes"] // kv.limits["lanes_per_block"]
        blocks = 2 * kv.limits["stage_steps"] * per_step + 3
        c = _fused_case(rng, kv.facts["ggml_type"], kv.limits["max_rows"], 37, blocks, norm=True,
                        bias=False, swiglu=False, residual=True)
        if kv.facts.get("x_int8", False):
            _int8_check(_fused_run(dev, c, variant=kv.name), c)
        else:
            _fused_check(_fused_run(dev, c, variant=kv.name), c)


def test_x_int8_plans_the_integer_dot_gemvs_where_they_were_faster(dev, rng):
    """linear(x_int8=True) plans the registry's first taker with the x_int8 entries included (the Q4_0, Q4_1 and
    Q5_K wide outputs, n >= 8192) and its output is the product with x rounded as they round it; a call no x_int8
    entry takes (short rows, several rows of x, a format without one) keeps the plain plan, x f32, and says so; a
    forced variant must round x; a dense W refuses the option."""
    for t, rows, n in (("Q4_0", 1, 8192), ("Q4_1", 1, 8200), ("Q5_K", 1, 8192)):
        plan = plan_linear_q(rows, n, 512, t, x_int8=True)
        want = _first_match(rows, n, 512, t, None, False, x_int8=True)
        assert plan.variant == want.name and kernel(plan.variant).facts["x_int8"] and plan.row_chunks == 1
        assert plan.reason.startswith("x_int8: x rounded to int8 per 32 weights")
        assert plan_linear_q(rows, n, 512, t).variant != plan.variant  # a plain call keeps x f32
        c = _fused_case(rng, t, rows, n, 512 // FORMATS[t].block_weights, norm=True, bias=True, swiglu=False,
                        residual=True)
        if cannot_run(dev, plan.variant) is None:   # on a device without subgroups x stays f32 (tested below)
            _int8_check(_fused_run(dev, c, x_int8=True), c)
    for t, rows, n in (("Q4_0", 1, 64), ("Q4_1", 3, 8192), ("Q4_K", 1, 16384), ("Q8_0", 1, 128256), ("IQ4_XS", 1, 64)):
        plain, plan = plan_linear_q(rows, n, 512, t), plan_linear_q(rows, n, 512, t, x_int8=True)
        assert plan.variant == plain.variant == _first_match(rows, n, 512, t, None, False).name
        assert plan.reason == (f"x_int8: no {t} GEMV that rounds x to int8 is planned for this call (none was faster "
                               f"here), so x stays f32; " + plain.reason)
    with pytest.raises(wg.PlanError, match="x_int8=True asks for a GEMV that rounds x to int8, and the forced "
                                           "variant quant_gemv_r1_q4_0 keeps x f32; those that round it: "
                                           r"\['quant_gemv_r1_wide_xr_q4_0', 'quant_gemv_r1_wide_i8_q4_0', "
                                           r"'quant_gemv_r8_i8stage_q4_0'\]"):
        plan_linear_q(1, 64, 512, "Q4_0", "quant_gemv_r1_q4_0", x_int8=True)
    assert plan_linear_q(2, 64, 512, "Q4_0", "quant_gemv_r8_i8stage_q4_0", x_int8=True).reason.startswith("forced")
    x = dev.tensor(np.ones((1, 64), np.float32))
    with pytest.raises(wg.ArgumentError, match="linear: x_int8=True rounds x for a QuantizedWeight's integer-dot"):
        wg.ops.linear(x, dev.tensor(np.ones((8, 64), np.float32)), x_int8=True)
    with pytest.raises(wg.ArgumentError, match="linear: x_int8=1 must be True or False"):
        wg.ops.linear(x, quantize(np.ones((8, 64), np.float32), "Q8_0").upload(dev), x_int8=1)


def test_x_int8_widest_outputs_round_x_once_a_call(dev, rng):
    """An x_int8 call of >= 65536 output rows (a vocabulary's lm_head: quant.toml's x_rounded entry, first in file
    order) rounds x to int8 in a pre-pass once for the call and the GEMV stages the rounded blocks: two dispatches
    (dev.stats), the plan's reason says so, and the product is the one of x rounded as the other x_int8 GEMVs round
    it (with the fused norm; and forced with 3 rows of x: 3 chunks of the one-row GEMV reading 3 rounded rows);
    narrower outputs (gate+up) round x in every workgroup, one dispatch."""
    for t, n, want, dispatches in (("Q4_0", 65536, "quant_gemv_r1_wide_xr_q4_0", 2),
                                   ("Q4_1", 65552, "quant_gemv_r1_wide_xr_q4_1", 2),
                                   ("Q4_0", 8192, "quant_gemv_r1_wide_i8_q4_0", 1)):
        plan = plan_linear_q(1, n, 256, t, x_int8=True)
        assert plan.variant == want == _first_match(1, n, 256, t, None, False, x_int8=True).name
        skip_unless_runs(dev, want)
        assert ("a pre-pass rounded it once for the call" in plan.reason) == (dispatches == 2)
        for rows, variant in ((1, None), (3, want)):  # 3 rows: the forced one-row GEMV in 3 chunks
            c = _fused_case(rng, t, rows, n, 256 // 32, norm=True, bias=True, swiglu=False, residual=True)
            dev.sync()
            before = dev.stats.dispatches
            got = _fused_run(dev, c, variant=variant, x_int8=True)
            assert dev.stats.dispatches - before == dispatches
            _int8_check(got, c)


def test_x_int8_keeps_a_non_finite_x_non_finite(dev, rng):
    """A NaN or inf in x (or in the fused norm's weights) makes the outputs it feeds NaN in the x_int8 GEMVs, as
    in the f32 ones; rounding it to int8 had turned a NaN into a 0 and left the row's outputs finite (the max that
    sets the step passes over a NaN). The other rows keep x rounded as usual. The pre-pass GEMV (x_rounded), one
    that rounds x as it stages it, and a K-quant's (256-weight blocks: rounded per 32 the same way)."""
    for variant, t, blocks in (("quant_gemv_r1_wide_xr_q4_0", "Q4_0", 3), ("quant_gemv_r8_i8stage_q4_0", "Q4_0", 3),
                               ("quant_gemv_r8_k_i8stage_q4_k", "Q4_K", 1)):
        skip_unless_runs(dev, variant)
        c = _fused_case(rng, t, 4, 13, blocks, norm=False, bias=True, swiglu=False, residual=False)
        c["x"][1, 5], c["x"][2, 40], c["x"][3, 0] = np.nan, np.inf, -np.inf
        got = _fused_run(dev, c, variant=variant, x_int8=True)
        assert np.all(np.isnan(got[1:])), (variant, got[1:])  # the float64 reference: NaN, +-inf or NaN
        _int8_check(got[:1], dict(c, x=c["x"][:1]))
    c = _fused_case(rng, "Q4_0", 2, 13, 3, norm=True, bias=False, swiglu=False, residual=False)
    c["norm"][33] = np.nan
    assert np.all(np.isnan(_fused_run(dev, c, variant="quant_gemv_r8_i8stage_q4_0", x_int8=True)))


@pytest.mark.parametrize("ggml_type,variants", [
    ("Q4_0", ("quant_gemv_r1_wide_xr", "quant_gemv_r8_i8stage")), ("Q4_1", ("quant_gemv_r1_wide_i8",)),
    ("Q8_0", ("quant_gemv_r8_i8stage",)), ("Q5_K", ("quant_gemv_r8_k_i8stage",)),
    ("Q6_K", ("quant_gemv_r8_k_i8stage",)), ("Q2_K", ("quant_gemv_r8_k_i8stage",)),
])
def test_x_int8_rounds_tiny_x(dev, rng, ggml_type, variants):
    """x whose largest |x| a block is below 127 / f32's largest (~3.7e-37) rounds as any other: 127 / max was inf
    there and rounded the block to zeros (an output of 0 for a row of such x). On a device that flushes subnormals
    (Vulkan allows it: the H100) a block whose max is below 127 * 2^-126 (~1.5e-36) had a subnormal step, read as 0,
    and d * step (sc * step in the K-quants) was subnormal for blocks up to ~1e-34: outputs of 0 where float64 gives
    ~1e-36; the step is now 2^-126 at least and multiplied last. Against float64: x rounded to the nearest of its
    block's steps moves an output by at most half a step times the |w| it meets."""
    skip_unless_runs(dev, *(f"{v}_{ggml_type.lower()}" for v in variants))
    qw = quantize(rng.standard_normal((13, 256)).astype(np.float32), ggml_type)
    w = gguf_dequantize(qw.raw(), gguf.GGMLQuantizationType[ggml_type]).astype(np.float64)
    x = (rng.standard_normal((4, 256)) * np.array([[1e-37], [3e-38], [3e-36], [1.0]])).astype(np.float32)
    x[1, 40:] *= 1e6  # one row's blocks of very different sizes
    # a subnormal x itself may be read as 0 (flushed): out of this test, whose x are 0 or normal
    x[np.abs(x) < F32_TINY] = 0
    step = np.repeat(_i8_steps(np.abs(x.astype(np.float64)).reshape(4, -1, 32).max(-1)), 32, axis=1)
    want = x.astype(np.float64) @ w.T
    bound = 0.51 * step @ np.abs(w).T + 1e-6 * np.abs(want)
    assert np.sum(np.abs(want[:3]) > bound[:3]) >= 13  # an output of 0 would show
    for variant in variants:
        got = wg.ops.linear(dev.tensor(x), qw.upload(dev), variant=f"{variant}_{ggml_type.lower()}",
                            x_int8=True).numpy()
        assert np.all(np.abs(got - want) <= bound), (variant, got, want)


def test_x_int8_gemvs_fuse_swiglu(dev, rng):
    """A decode step's fused gate + up (swiglu, the norm, a bias and a residual) through each planned GEMV that
    rounds x to int8 (an x_int8 Llama's gate + up run them), forced on a small shape, as many rows as it holds plus
    one: against float64 with x (after the norm's weights) rounded as the kernels round it, then silu(gate) * up +
    residual. (The other x_int8 tests leave swiglu out.)"""
    eps, n = 1e-5, 24
    for kv in kernels_for("linear_q"):
        if not kv.facts.get("x_int8") or kv.facts.get("candidate") or cannot_run(dev, kv.name):
            continue
        t = kv.facts["ggml_type"]
        k = FORMATS[t].block_weights * (5 if FORMATS[t].block_weights == 32 else 2)
        m = kv.limits["max_rows"] + 1
        qw = quantize((rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32), t)
        w = gguf_dequantize(qw.raw(), gguf.GGMLQuantizationType[t]).astype(np.float64)
        x = (rng.standard_normal((m, k)) * 2).astype(np.float32)
        norm = (1 + 0.2 * rng.standard_normal(k)).astype(np.float32)
        b, res = rng.standard_normal(n).astype(np.float32), rng.standard_normal((m, n // 2)).astype(np.float32)
        got = wg.ops.linear(dev.tensor(x), qw.upload(dev), dev.tensor(b), norm=dev.tensor(norm), eps=eps,
                            activation="swiglu", residual=dev.tensor(res), variant=kv.name, x_int8=True).numpy()
        y = _x_rounded(x * norm) @ w.T / np.sqrt(np.mean(x.astype(np.float64) ** 2, -1, keepdims=True) + eps) + b
        gate, up = y[:, :n // 2], y[:, n // 2:]
        want = gate / (1 + np.exp(-gate)) * up + res
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max(), err_msg=kv.name)


def _first_match(rows, n, k, ggml_type, caps, swiglu, x_int8=False):
    """The planning rule of registry/quant.toml, read off the registry facts: the first non-candidate GEMV of the
    format whose limits take the call (more rows than any holds: the taker with the most max_rows); those that
    round x to int8 only for an x_int8 call."""
    takers = []
    for kv in kernels_for("linear_q"):
        lim, f = kv.limits, kv.facts
        if f["ggml_type"] != ggml_type or f.get("candidate") or (f.get("x_int8") and not x_int8):
            continue
        if f.get("cpu_only") and not (caps is not None and caps.is_cpu):
            continue
        if caps is not None and (not set(kv.features) <= caps.features
                                 or kv.workgroup_memory > caps.max_workgroup_storage):
            continue
        if swiglu and (lim["features_per_lane"] % 2 or n % lim["features_per_lane"]):
            continue
        if n >= f.get("min_n", 0) and k >= f.get("min_k", 0):
            takers.append(kv)
    fits = [kv for kv in takers if rows <= kv.limits["max_rows"]]
    return fits[0] if fits else max(takers, key=lambda kv: kv.limits["max_rows"])


SUBGROUPS = Caps.synthetic(has_subgroups=True, max_workgroup_storage=32768)
PLAIN = Caps.synthetic()
CPU = attrs.evolve(SUBGROUPS, is_cpu=True)


@pytest.mark.parametrize("x_int8", [False, True], ids=["x-f32", "x-int8"])
@pytest.mark.parametrize("caps", [SUBGROUPS, PLAIN, None, CPU], ids=["subgroups", "plain", "any-device", "cpu"])
def test_plan_is_the_first_registry_match(caps, x_int8):
    seen = set()
    for t in TYPES:
        for rows in (1, 2, 8, 9, 40):
            for n, k in ((100, 2048), (3072, 2048), (8192, 2048), (16384, 2048), (128256, 2048), (2048, 8192),
                         (4096, 14336), (4096, 4096)):
                for swiglu in (False, True):
                    p = plan_linear_q(rows, n, k, t, swiglu=swiglu, caps=caps, x_int8=x_int8)
                    want = _first_match(rows, n, k, t, caps, swiglu, x_int8)
                    assert p.variant == want.name, (t, rows, n, k, swiglu)
                    assert p.row_chunks == -(-rows // want.limits["max_rows"])
                    assert ("chunks of" in p.reason) == (rows > want.limits["max_rows"])
                    seen.add(p.variant.rsplit("_", 2)[0])
    rounding = {"quant_gemv_r1_wide_xr", "quant_gemv_r1_wide_i8", "quant_gemv_r1_wide_k_i8"} if x_int8 else set()
    gpu = {"quant_gemv_r1_wide", "quant_gemv_r1", "quant_gemv_r1_long", "quant_gemv_r8", "quant_gemv_r8_long",
           "quant_gemv_r8_whole"}
    if caps is PLAIN:
        assert seen == {"quant_gemv_r1_wg", "quant_gemv_r8_wg"}
    elif caps is CPU:  # its own classes for Q8_0 / Q4_0 / Q4_1 (Q4_0's long rows too); the GPU's for the rest
        assert seen == (gpu - {"quant_gemv_r1_long"}) | rounding | {"quant_gemv_r1_cpu", "quant_gemv_r8_cpu"}
    else:
        assert seen == gpu | rounding


def test_plan_reasons_and_forcing():
    p = plan_linear_q(1, 3072, 2048, "Q4_1", fused=("rmsnorm",), caps=SUBGROUPS)
    assert p.reason == ("1 rows <= 1: Q4_1 GEMV (blocks dequantized in registers), 16 rows of W per workgroup (192 "
                        "workgroups), 32 lanes per row (each reading whole 32-weight blocks, x staged in workgroup "
                        "memory), 1 steps of 2 row(s) in flight per lane, each x load feeding 2 rows, subgroup sums; "
                        "rmsnorm fused")
    p = plan_linear_q(1, 3072, 2048, "Q8_0", fused=("rmsnorm",), caps=SUBGROUPS)   # Q8_0: whole blocks, 4 rows
    assert "32 rows of W per workgroup (96 workgroups), 32 lanes per row (each reading whole" in p.reason
    p = plan_linear_q(1, 3072, 2048, "Q4_0", fused=("rmsnorm",), caps=SUBGROUPS)
    assert p.reason == ("1 rows <= 1: Q4_0 GEMV (blocks dequantized in registers), 16 rows of W per workgroup (192 "
                        "workgroups), 32 lanes per row (each reading whole 32-weight blocks, x staged in workgroup "
                        "memory), 1 steps of 2 row(s) in flight per lane, each x load feeding 2 rows, subgroup sums; "
                        "rmsnorm fused")
    assert plan_linear_q(1, 16384, 2048, "Q4_K", swiglu=True, caps=SUBGROUPS).reason.startswith(
        "1 rows <= 1 (n >= 8192): Q4_K GEMV")
    # long rows of W with several rows of x: their own class (a speed rule, so forcing it on short rows works)
    p = plan_linear_q(8, 2048, 8192, "Q4_0", caps=SUBGROUPS)
    assert p.variant == "quant_gemv_r8_long_q4_0" and p.reason.startswith("8 rows <= 8 (k >= 8192): Q4_0 GEMV")
    assert "64 lanes per row" in p.reason and "1 row(s) in flight" in p.reason
    # shorter rows: whole blocks for the 32-weight formats, the shared-block entry for the K-quants
    assert plan_linear_q(8, 2048, 4096, "Q4_0", caps=SUBGROUPS).variant == "quant_gemv_r8_whole_q4_0"
    assert plan_linear_q(8, 2048, 4096, "Q4_K", caps=SUBGROUPS).variant == "quant_gemv_r8_q4_k"
    assert plan_linear_q(8, 4096, 8192, "Q4_0", swiglu=True, caps=SUBGROUPS).variant == "quant_gemv_r8_whole_q4_0"
    assert plan_linear_q(3, 64, 256, "Q4_0", "quant_gemv_r8_long_q4_0").variant == "quant_gemv_r8_long_q4_0"
    candidates = [kv for kv in kernels_for("linear_q") if kv.facts.get("candidate")]
    # the formats with tuning candidates: the shared-block and whole-block readers the H200 A/Bs compare
    assert {kv.facts["ggml_type"] for kv in candidates} == {"Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K", "Q3_K",
                                                            "Q2_K"}
    for kv in candidates:  # a candidate only when forced
        t = kv.facts["ggml_type"]
        assert plan_linear_q(1, 100, 2048, t).variant != kv.name
        assert plan_linear_q(1, 100, 2048, t, kv.name).variant == kv.name
    with pytest.raises(wg.PlanError, match="variant 'quant_gemv_r1_q4_0' is not a Q8_0 GEMV"):
        plan_linear_q(1, 8, 256, "Q8_0", "quant_gemv_r1_q4_0")
    with pytest.raises(wg.UnsupportedError, match=r"forced variant quant_gemv_r1_q4_0 needs features \['subgroup'\]"):
        plan_linear_q(1, 8, 256, "Q4_0", "quant_gemv_r1_q4_0", caps=PLAIN)
    assert "subgroup" not in kernel(plan_linear_q(1, 8, 256, "Q4_0", caps=PLAIN).variant).features
    small = attrs.evolve(SUBGROUPS, max_workgroup_storage=2048)  # the 8-row kernels do not fit: 1-row chunks
    p = plan_linear_q(5, 64, 256, "Q4_K", caps=small)   # (Q4_1's one-row kernel stages x too: the plain one there)
    assert p.variant == "quant_gemv_r1_q4_k" and p.row_chunks == 5 and "5 chunks of 1 rows" in p.reason
    assert plan_linear_q(5, 64, 256, "Q4_1", caps=small).variant == "quant_gemv_r1_wg_q4_1"


def test_plan_of_a_matrix_no_weight_can_have_is_refused():
    """plan_linear_q(1, 5, 48, "Q4_0") (48 weights: one and a half Q4_0 blocks) and (1, 5, 100, "Q4_K") returned a
    plan, its reason speaking of 32- and 256-weight blocks, for rows no QuantizedWeight can hold (GGML rows are whole
    blocks: linear refuses them), and a [2^31, 2^20] Q4_K matrix (~1.3e15 bytes, past the kernels' u32 offsets) was
    planned as well; now both are refused as QuantizedWeight and linear refuse them, naming the value and the limit."""
    with pytest.raises(wg.ShapeError, match=r"plan_linear_q: in_features 48 is not a multiple of Q4_0's block of 32"):
        plan_linear_q(1, 5, 48, "Q4_0")
    with pytest.raises(wg.ShapeError, match=r"plan_linear_q: in_features 100 is not a multiple of Q4_K's block of 256"):
        plan_linear_q(1, 5, 100, "Q4_K", "quant_gemv_r1_q4_k")
    with pytest.raises(wg.ShapeError, match=r"in_features 16 is not a multiple of Q8_0's block of 32"):
        plan_linear_q(3, 8, 16, "Q8_0", x_int8=True)
    with pytest.raises(wg.LimitError, match=r"plan_linear_q: a Q4_K matrix of shape \(2147483648, 1048576\) is "
                                            r"1266637395197952 bytes; the kernels address at most 4294967232"):
        plan_linear_q(1, 2**31, 2**20, "Q4_K")
    assert plan_linear_q(1, 5, 64, "Q4_0").row_chunks == 1   # whole blocks plan as before


def test_bad_arguments_raise_before_gpu_work(dev, rng):
    qw = quantize(rng.standard_normal((4, 64)).astype(np.float32), "Q8_0")
    w = qw.upload(dev)
    x = dev.tensor(np.zeros((1, 64), np.float32))
    before = dev.stats.snapshot()
    with pytest.raises(wg.ShapeError, match=r"x must be \[\.\.\., 64\] for a Q8_0 \[4, 64\] weight"):
        wg.ops.linear(dev.tensor(np.zeros((1, 32), np.float32)), w)
    with pytest.raises(wg.DtypeError, match="blocks are host data"):
        wg.ops.linear(x, qw)
    with pytest.raises(wg.ShapeError, match=r"bias must be \(4,\)"):
        wg.ops.linear(x, w, dev.tensor(np.zeros(3, np.float32)))
    with pytest.raises(wg.DtypeError, match="linear: w must be a QuantizedWeight, got Tensor"):
        wg.ops.linear_q(x, dev.tensor(np.zeros((4, 64), np.float32)))
    with pytest.raises(wg.ShapeError,
                       match=r"norm weight must be f32 \(64,\) for a Q8_0 \[4, 64\] weight, got f32 \(32,\)"):
        wg.ops.linear(x, w, norm=dev.tensor(np.ones(32, np.float32)))
    if dev.caps.has_f16:   # a device without shader-f16 refuses the f16 tensors themselves (dev.tensor)
        with pytest.raises(wg.DtypeError,
                           match=r"norm weight must be f32 \(64,\) for a Q8_0 \[4, 64\] weight, got f16 \(64,\)"):
            wg.ops.linear(x, w, norm=dev.tensor(np.ones(64, np.float16)))   # was a ShapeError, an f16 bias a DtypeError
        with pytest.raises(wg.DtypeError,
                           match=r"residual must be f32 \(1, 4\) \(the output's shape\), got f16 \(1, 4\)"):
            wg.ops.linear(x, w, residual=dev.tensor(np.zeros((1, 4), np.float16)))
    with pytest.raises(wg.ArgumentError, match=r"linear: eps=-1.0 must be a finite real in \[1.1754944e-38, "):
        wg.ops.linear_q(x, w, norm=dev.tensor(np.ones(64, np.float32)), eps=-1.0)
    with pytest.raises(wg.ArgumentError, match="linear: eps='1e-5' must be a finite real"):
        wg.ops.linear_q(x, w, eps="1e-5")
    with pytest.raises(wg.ShapeError, match=r"residual must be f32 \(1, 2\) \(the output's shape\), got f32 \(1, 4\)"):
        wg.ops.linear(x, w, activation="swiglu", residual=dev.tensor(np.zeros((1, 4), np.float32)))
    with pytest.raises(wg.ArgumentError, match="linear: activation='gelu' must be one of None, 'swiglu'"):
        wg.ops.linear(x, w, activation="gelu")
    odd = quantize(rng.standard_normal((5, 64)).astype(np.float32), "Q8_0").upload(dev)
    with pytest.raises(wg.ShapeError, match=r"activation='swiglu' needs W \[2 \* n, in\]"):
        wg.ops.linear(x, odd, activation="swiglu")
    with pytest.raises(wg.PlanError, match="forced variant quant_gemv_r8_long_q8_0 swiglu needs an even"):
        wg.ops.linear_q(x, w, activation="swiglu", variant="quant_gemv_r8_long_q8_0")
    # linear on blocks: a forced variant is one of the format's GEMVs, never silently dropped; split_k refused
    with pytest.raises(wg.PlanError, match="variant 'gemv_r1_f32' is not a Q8_0 GEMV"):
        wg.ops.linear(x, w, variant="gemv_r1_f32")
    with pytest.raises(wg.PlanError, match=r"linear: split_k=2 cuts a GEMM's K; a QuantizedWeight \(Q8_0\)"):
        wg.ops.linear(x, w, split_k=2)
    delta = dev.stats.since(before)
    assert delta.submits == 0 and delta.dispatches == 0


def test_iq4_quantizers_pick_the_nearest_table_value(rng):
    """quantize(.., "IQ4_NL") / "IQ4_XS": under the scale each block (sub-block) stores, every weight is the table
    value nearest to it (brute force over the 16, float64), and a block's peak is exact up to its f16 scale."""
    from wgraph.ggml_quantizers import IQ4_VALUES

    a = rng.standard_normal((4, 512)).astype(np.float32)
    a[1, :256] = 0
    table = IQ4_VALUES.astype(np.float64)
    for t, size in (("IQ4_NL", 32), ("IQ4_XS", 32)):
        qw = quantize(a, t)
        got = gguf_dequantize(qw.raw(), gguf.GGMLQuantizationType[t]).astype(np.float64).reshape(-1, size)
        x = a.astype(np.float64).reshape(-1, size)
        scale = got[np.arange(len(got)), np.abs(got).argmax(1)] / -127   # each sub-block's d * (scale - 32)
        best = np.abs(x[:, :, None] - scale[:, None, None] * table).min(axis=2)
        assert np.allclose(np.abs(got - x), best, atol=1e-6), t
        assert (got[16:24] == 0).all()   # a[1, :256]: all-zero blocks stay zero


def test_grid_formats_carry_their_grid_after_the_blocks():
    """The grid formats' GPU words: the raw blocks padded to 16 bytes with 4 more, then the format's grid as bytes
    (gguf's grids: 256-1024 entries of 8 or 4 magnitudes); the other formats have no table."""
    for t, width in (("IQ2_XXS", 8), ("IQ2_XS", 8), ("IQ2_S", 8), ("IQ3_XXS", 4), ("IQ3_S", 4), ("IQ1_S", 8),
                     ("IQ1_M", 8)):
        raw = np.zeros(3 * FORMATS[t].block_bytes, np.uint8)
        w = QuantizedWeight.from_bytes(t, (3, 256), raw)
        at = (3 * FORMATS[t].block_bytes + 4 + 15) // 16 * 4
        cls = getattr(gguf.quants, t)
        cls.init_grid()
        grid = cls.grid.reshape(-1, width).astype(np.int8).view(np.uint8)   # IQ1's -1 as the byte 255
        assert w.blocks.size == at + grid.size // 4 and w.raw().size == raw.size
        assert np.array_equal(w.blocks[at:].view(np.uint8).reshape(-1, width), grid)
    assert FORMATS["Q4_K"].words(3, 256) == (3 * 144 + 4 + 15) // 16 * 4


def test_quantized_weight_checks_sizes():
    raw = bytes(range(256)) * 3  # 768 bytes
    with pytest.raises(wg.ShapeError, match=r"a Q4_0 \[3, 64\] matrix is 108 bytes \(3 rows of 2 blocks of 18\), got 768"):
        QuantizedWeight.from_bytes("Q4_0", (3, 64), raw)
    with pytest.raises(wg.ShapeError, match="in_features 48 is not a multiple of Q4_0's block of 32 weights"):
        QuantizedWeight.from_bytes("Q4_0", (3, 48), raw[:81])
    with pytest.raises(wg.ShapeError, match="in_features 300 is not a multiple of Q4_K's block of 256 weights"):
        QuantizedWeight.from_bytes("Q4_K", (1, 300), raw)
    with pytest.raises(wg.UnsupportedError, match=r"'TQ1_0' is not a block format wgraph computes on"):
        QuantizedWeight.from_bytes("TQ1_0", (1, 256), raw)
    with pytest.raises(wg.ArgumentError, match=r"QuantizedWeight.from_bytes: shape=\(1.0, 32\) must be a tuple "
                                                 r"\(out_features, in_features\) of two integers >= 1"):
        QuantizedWeight.from_bytes("Q8_0", (1.0, 32), raw[:34])
    with pytest.raises(wg.DtypeError, match="raw blocks must be uint8, got int16"):
        QuantizedWeight.from_bytes("Q8_0", (1, 32), np.zeros(17, np.int16))
    with pytest.raises(wg.ShapeError, match=r"held as u32 \[12\]; blocks is u32 \[11\]"):
        QuantizedWeight("Q8_0", (1, 32), np.zeros(11, np.uint32))
    # 3 rows of 18-byte blocks: 54 bytes, 3 blocks starting mid-word; padded to 16 bytes with a word to spare
    qw = QuantizedWeight.from_bytes("Q4_0", (3, 32), raw[:54])
    assert qw.nbytes == 54 and qw.blocks.nbytes == 64
    assert qw.raw().tobytes() == raw[:54] and not qw.blocks.view(np.uint8)[54:].any()
    assert QuantizedWeight.from_bytes("Q4_K", (1, 256), raw[:144]).blocks.nbytes == 160
    assert QuantizedWeight.from_bytes("Q6_K", (3, 256), raw[:630]).blocks.nbytes == 640  # 630 + 4, to 16


@pytest.mark.parametrize("dtype", [np.float32, ">u4"])
def test_blocks_of_another_dtype_are_a_dtype_error(dtype):
    """float32 or big-endian >u4 blocks of the right length were a ShapeError ('held as u32 [12]; blocks is float32
    [12]'); a wrong dtype is a DtypeError in docs/errors.md's contract, naming the dtype and the u32 it needs."""
    words = FORMATS["Q8_0"].words(1, 32)
    with pytest.raises(wg.DtypeError, match=rf"QuantizedWeight: blocks must be u32 words .* holding the Q8_0 bytes, "
                                            rf"got {np.dtype(dtype)}"):
        QuantizedWeight("Q8_0", (1, 32), np.zeros(words, dtype))


def test_graph_file_blocks_of_another_dtype_are_a_dtype_error():
    """The op's own check (ops.quantized._check_blocks), met by a graph file whose blocks input is f32: a DtypeError
    naming the dtype, as QuantizedWeight's (was a ShapeError)."""
    words = FORMATS["Q8_0"].words(2, 32)
    g = wg.Graph("q")
    x, blocks = g.input("x", (1, 32)), g.input("b", (words,), dtype="u32")
    g.output("y", wg.ops.linear(x, QuantizedWeight("Q8_0", (2, 32), blocks)))
    text = g.to_json().replace('"u32"', '"f32"')
    with pytest.raises(wg.DtypeError, match=rf"linear: a Q8_0 \[2, 32\] weight's blocks must be u32 \[{words}\], "
                                            rf"got dtype f32"):
        wg.Graph.from_json(text)



def test_graph_file_params_of_linear_q_are_checked_as_linears():
    """A graph file's linear_q params reach infer unchecked by linear(): eps True ran as eps 1.0 and 1e-45 (a
    subnormal in the f32 uniform) ran, "1e-5" was a bare TypeError, eps 0 and activation "gelu" ShapeErrors and
    variant 5 a PlanError; each is now the ArgumentError of linear() and of the dense linear's graph node."""
    import json

    g = wg.Graph("q")
    words = FORMATS["Q8_0"].words(2, 32)
    x, blocks, norm = g.input("x", (1, 32)), g.input("b", (words,), dtype="u32"), g.input("n", (32,))
    g.output("y", wg.ops.linear(x, QuantizedWeight("Q8_0", (2, 32), blocks), norm=norm, eps=1e-5))
    data = json.loads(g.to_json())
    wg.Graph.from_json(json.dumps(data))   # the unedited file builds
    cases = [("eps", bad, "a finite real in") for bad in (True, 1e-45, "1e-5", 0)]
    cases += [("activation", "gelu", "one of None, 'swiglu'"), ("variant", 5, "a str")]
    for field, bad, rule in cases:
        edited = json.loads(json.dumps(data))
        next(n for n in edited["nodes"] if n["op"] == "linear_q")["params"]["fields"][field] = bad
        with pytest.raises(wg.ArgumentError, match=rf"\(linear_q\): linear: {field}={bad!r} must be {rule}"):
            wg.Graph.from_json(json.dumps(edited))

def test_stack_rows_concatenates_blocks(rng):
    a, b = (quantize(rng.standard_normal((n, 64)).astype(np.float32), "Q4_0") for n in (3, 2))
    s = stack_rows([a, b])
    assert s.shape == (5, 64)
    np.testing.assert_array_equal(s.dequantize(), np.concatenate([a.dequantize(), b.dequantize()]))
    with pytest.raises(wg.ShapeError, match="does not stack"):
        stack_rows([a, quantize(rng.standard_normal((2, 64)).astype(np.float32), "Q8_0")])


def test_q4_k_quantizer_round_trips_through_gguf(rng):
    """quantize_q4_k's blocks, decoded by gguf: each weight within half a step of its sub-block (plus the
    rounding of the 6-bit scale and min)."""
    a = (rng.standard_normal((4, 512)) * rng.uniform(0.01, 3, (4, 1))).astype(np.float32)
    a[0, :32] = 0.0  # an all-zero sub-block
    a[1, 32:64] = np.abs(a[1, 32:64]) + 1.0  # a positive one (its min is 0)
    raw = quantize_q4_k(a)
    back = gguf_dequantize(raw, gguf.GGMLQuantizationType.Q4_K)
    sub = a.reshape(-1, 8, 32).astype(np.float64)
    lo = np.minimum(sub.min(-1), 0)
    step = (sub.max(-1) - lo) / 15
    d = raw.reshape(-1, 144)[:, 0:2].copy().view(np.float16).astype(np.float64)
    dmin = raw.reshape(-1, 144)[:, 2:4].copy().view(np.float16).astype(np.float64)
    bound = step / 2 + 8 * d + dmin / 2 + 1e-6
    err = np.abs(back.reshape(-1, 8, 32) - sub).max(-1)
    assert np.all(err <= bound)
    assert np.all(back[0, :32] == 0)


def _best_symmetric_error(x: np.ndarray, levels: np.ndarray) -> float:
    """The least squared error of runs x [n, m] each under its own scale (either sign; 400 tried) over `levels`."""
    mids = (levels[:-1] + levels[1:]) / 2
    best = np.full(len(x), np.inf)
    for s in np.concatenate([np.linspace(0.5, 1.6, 200), -np.linspace(0.5, 1.6, 200)]):
        scale = s * np.abs(x).max(1, keepdims=True) / np.abs(levels).max()
        best = np.minimum(best, ((x - scale * levels[np.searchsorted(mids, x / scale)]) ** 2).sum(1))
    return float(best.sum())


def test_q3_k_quantizer_reaches_the_peak_and_near_the_best_scale(rng):
    """Q3_K's q is -4..3: a scale of max|w| / 4 clipped every positive peak to 3/4 of it (a constant row of 0.37
    came back 0.2775, 25% off; Gaussian weights 0.181 relative RMS where the best scale a sub-block gives 0.143).
    The peak goes to -4 (the scale signed) under a searched scale, as llama.cpp's make_q3_quants."""
    const = np.full((1, 256), 0.37, np.float32)
    assert np.abs(quantize(const, "Q3_K").dequantize() - const).max() < 1e-3
    a = rng.standard_normal((8, 256)).astype(np.float32)
    err = ((quantize(a, "Q3_K").dequantize() - a) ** 2).sum()
    best = _best_symmetric_error(a.reshape(-1, 16).astype(np.float64), np.arange(-4.0, 4.0))
    assert err < 1.1 * best, (err, best)
    d = quantize(a, "Q3_K").dequantize()   # decoded blocks quantize to about themselves
    assert np.sqrt(((quantize(d, "Q3_K").dequantize() - d) ** 2).mean() / (d ** 2).mean()) < 0.03


def _best_min_error(x: np.ndarray, nmax: int) -> float:
    """The least squared error of runs x [n, m] each as s * q - m0 (q in 0..nmax, m0 >= 0) with (s, m0) on a grid
    (s 51 steps of 0.7..1.2 x the run's span / nmax, m0 33 steps of -(its least, at most 0) +- 0.08 x span)."""
    lo = np.minimum(x.min(1, keepdims=True), 0)
    span = x.max(1, keepdims=True) - lo
    m0 = np.maximum(-lo[None] + span[None] * np.linspace(-0.08, 0.08, 33)[:, None, None], 0)   # [h, n, 1]
    best = np.full(len(x), np.inf)
    for f in np.linspace(0.7, 1.2, 51):
        s = span[None] * f / nmax
        back = s * np.clip(np.rint((x[None] + m0) / s), 0, nmax) - m0
        best = np.minimum(best, ((back - x[None]) ** 2).sum(2).min(0))
    return float(best.sum())


@pytest.mark.parametrize("ggml_type, run, margin", [("Q2_K", 16, 1.18), ("Q4_K", 32, 1.08), ("Q5_K", 32, 1.12),
                                                    ("Q6_K", 16, 1.14)])
def test_k_quantizers_near_the_best_scale_a_sub_block(rng, ggml_type, run, margin):
    """Relative RMS error on Gaussian weights (decoded by gguf) within `margin` of the best a sub-block's own
    scale (and min) gives, searched here on a grid, the 4- or 6-bit rounding of scales ignored. The min/max
    roundings (Q6_K: max|w| / 31) were 1.26, 1.14, 1.15 and 1.19 times it (Q2_K, Q4_K, Q5_K, Q6_K); llama.cpp's
    searches (make_qkx2_quants, make_qx_quants) 1.13, 1.04, 1.09, 1.09."""
    a = rng.standard_normal((16, 2048)).astype(np.float32)
    err = ((quantize(a, ggml_type).dequantize().astype(np.float64) - a) ** 2).sum()
    x = a.reshape(-1, run).astype(np.float64)
    best = (_best_symmetric_error(x, np.arange(-32.0, 32.0)) if ggml_type == "Q6_K"
            else _best_min_error(x, {"Q2_K": 3, "Q4_K": 15, "Q5_K": 31}[ggml_type]))
    assert np.sqrt(err / best) < margin, (np.sqrt(err / best), margin)


def _make_qkx2_quants(x, w, nmax, rmin, rdelta, nstep, use_mad):
    """llama.cpp's make_qkx2_quants, one run at a time, written out as ggml-quants.c has it: (scale, min)."""
    lo, hi = min(float(x.min()), 0.0), float(x.max())
    if hi == lo:
        return 0.0, -lo
    scale = (hi - lo) / nmax
    l = np.clip(np.rint(nmax / (hi - lo) * (x - lo)), 0, nmax)
    diff = scale * l + lo - x
    best = (w * (np.abs(diff) if use_mad else diff * diff)).sum()
    for i in range(nstep + 1):
        l = np.clip(np.rint((rmin + rdelta * i + nmax) / (hi - lo) * (x - lo)), 0, nmax)
        sw, sx, sl, sll, sxl = w.sum(), (w * x).sum(), (w * l).sum(), (w * l * l).sum(), (w * l * x).sum()
        det = sw * sll - sl * sl
        if det > 0:
            s, m = (sw * sxl - sx * sl) / det, (sll * sx - sl * sxl) / det
            if m > 0:
                s, m = sxl / sll, 0.0
            diff = s * l + m - x
            err = (w * (np.abs(diff) if use_mad else diff * diff)).sum()
            if err < best:
                best, scale, lo = err, s, m   # later roundings start from this min (hi - lo changes too)
    return scale, -lo


@pytest.mark.parametrize("nmax, rmin, nstep, mad", [(3, -0.5, 15, True), (15, -1.0, 20, False), (31, -0.5, 15, False)])
def test_min_search_follows_make_qkx2_quants(rng, nmax, rmin, nstep, mad):
    """The vectorised search (Q2_K, Q4_K, Q5_K) picks make_qkx2_quants' scale and min, run by run. Not all: its
    squared errors come from float32 sums (1e-4 relative for Q5_K), so near-ties go another way and llama.cpp's
    sequential search (each better fit moves the start of the next roundings) takes another path, as often to a
    lower error as a higher: 1-4% of runs differ on seeds tried (Q5_K the most)."""
    from wgraph.ggml_quantizers import _min_search

    n = 16 if nmax == 3 else 32
    x = rng.standard_t(4, (300, n)).astype(np.float32)
    x[0], x[1], x[2] = 0.0, -0.5, np.abs(x[2]) + 1   # all zero, constant, all positive
    w = np.abs(x) if mad else np.sqrt((x * x).mean(1, keepdims=True)) + np.abs(x)
    got = np.stack(_min_search(x, w, nmax, rmin, 0.1, nstep, mad), 1)
    want = np.array([_make_qkx2_quants(x[i], w[i], nmax, rmin, 0.1, nstep, mad) for i in range(len(x))])
    same = np.isclose(got, want, rtol=1e-4, atol=1e-7).all(1)
    assert same.mean() >= 0.93 and same[:3].all(), np.flatnonzero(~same)


@pytest.mark.parametrize("ggml_type", ["Q3_K", "Q4_K", "Q5_K", "Q6_K"])
def test_k_quantizers_keep_tiny_weights(rng, ggml_type):
    """Weights of ~1e-6: d rounded to 0 in f16 while dmin did not, so every Q4_K / Q5_K weight decoded to -min
    (relative RMS error 2.4, worse than zeros) and Q3_K's and Q6_K's to 0 (Q3_K's until after the others were
    fixed: relative error 0.88). d (and dmin) now stay at f16's least subnormal, the integer scales rounded from
    it: about 0.1 (Q3_K 0.15)."""
    a = (rng.standard_normal((4, 256)) * 1e-6).astype(np.float32)
    back = quantize(a, ggml_type).dequantize()
    assert np.sqrt(((back - a) ** 2).mean() / (a ** 2).mean()) < 0.2


@pytest.mark.parametrize("ggml_type", ["Q2_K", "Q4_K", "Q5_K"])
def test_min_quantizers_are_no_worse_than_zeros_below_f16s_reach(rng, ggml_type):
    """Weights of ~1e-7 (Q2_K ~3e-8): d kept at f16's least subnormal is past their scale, so each sub-block's
    integer scale rounds to 0, and its min, rounded from the sub-block's least value (~2e-7 / 2^-24: 3), put every
    weight at -dmin * 3 ~ -1.8e-7: relative RMS error 1.8 (Q4_K), 2.3 (Q5_K), 1.2 (Q2_K at 3e-8), worse than
    writing zeros. Such a sub-block's min now comes from its mean: against float64, never worse than zeros, and
    ~1e-6 weights as before (test_k_quantizers_keep_tiny_weights)."""
    for size in (1e-7, 3e-8):
        a = (rng.standard_normal((8, 256)) * size).astype(np.float64)
        back = quantize(a.astype(np.float32), ggml_type).dequantize().astype(np.float64)
        assert np.sqrt(((back - a) ** 2).mean() / (a ** 2).mean()) <= 1.0, size


def test_graph_with_block_states_compiles_explains_and_round_trips(dev, rng):
    """A graph whose weight is a u32 state of blocks: compiled, replayed with new x, explained, and its JSON
    rebuilt (the op's params are a plain record)."""
    qw = quantize(rng.standard_normal((10, 256)).astype(np.float32), "Q4_K")
    g = wg.Graph("qgemv")
    x = g.input("x", (1, 256))
    blocks = g.state("w", qw.blocks.shape, "u32", init=qw.blocks)
    g.output("y", wg.ops.linear(x, qw.with_blocks(blocks)))
    prog = g.compile(dev)
    for _ in range(2):
        xv = rng.standard_normal((1, 256)).astype(np.float32)
        check(prog.run(x=xv)["y"].numpy(), xv, qw)
    assert "Q4_K GEMV (blocks dequantized in registers)" in prog.explain(full=True)
    assert wg.Graph.from_json(g.to_json()).to_json() == g.to_json()


def _without_table(ggml_type: str, rows: int, seed: int):
    """A quantized [rows, 256] weight and its words with zeros where the grid table goes."""
    w = quantize(np.random.default_rng(seed).standard_normal((rows, 256)).astype(np.float32), ggml_type)
    bad = w.blocks.copy()
    bad[FORMATS[ggml_type].table_at(*w.shape):] = 0
    return w, bad


def _no_table_error(ggml_type: str):
    return pytest.raises(wg.ShapeError, match=rf"the last {FORMATS[ggml_type].table_words} words of {ggml_type} "
                                              r"blocks hold the format's grid table, and these do not")


@pytest.mark.parametrize("ggml_type", [f for f in FORMATS if FORMATS[f].table_words])
def test_host_words_of_a_grid_format_must_end_with_its_table(ggml_type):
    """QuantizedWeight of host words checks the grid table the GEMV reads after the blocks: words holding the raw
    bytes and zeros there were taken, and the GPU product came out ~0 where dequantize() was right."""
    w, bad = _without_table(ggml_type, 8, 0)
    with _no_table_error(ggml_type):
        QuantizedWeight(ggml_type, w.shape, bad)
    assert QuantizedWeight(ggml_type, w.shape, w.blocks.copy()).nbytes == w.nbytes


@pytest.mark.parametrize("ggml_type", ["IQ2_XXS", "IQ1_M"])
def test_gpu_words_of_a_grid_format_must_end_with_its_table(dev, ggml_type):
    """The same check for a GPU tensor, by a readback of its table: a tensor of the raw bytes padded as the other
    formats are (no table) was taken and linear / embedding_q gave zeros where dequantize() was right. A tensor
    holding the table is taken (checked once: a decoder makes its weights over the same states at each prefill),
    upload's needs no readback, and inside an open recording the check is refused rather than skipped."""
    w, bad = _without_table(ggml_type, 4, 1)
    with _no_table_error(ggml_type):
        QuantizedWeight(ggml_type, w.shape, dev.tensor(bad, "u32"))
    good = dev.tensor(w.blocks, "u32")
    before = dev.stats.snapshot()
    qw = QuantizedWeight(ggml_type, w.shape, good)
    assert dev.stats.since(before).readbacks == 1
    before = dev.stats.snapshot()
    qw = qw.with_blocks(good)   # checked already
    uploaded = w.upload(dev)
    assert dev.stats.since(before).readbacks == 0
    x = np.random.default_rng(2).standard_normal((1, 256)).astype(np.float32)
    want = x.astype(np.float64) @ w.dequantize().astype(np.float64).T
    for weight in (qw, uploaded):
        got = wg.ops.linear(dev.tensor(x), weight).numpy()
        assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    fresh = dev.tensor(w.blocks, "u32")
    with dev.record():
        with pytest.raises(wg.RecordingError, match=r"checked for its grid table by a readback, which an open "
                                                    r"recording cannot make"):
            QuantizedWeight(ggml_type, w.shape, fresh)


def test_iq4_xs_quantizer_keeps_a_positive_largest_scale():
    """IQ4_XS's 6-bit sub-block scales are -32..31: d = max|scale| / 32 put a block whose largest scale is positive
    (its peak negative: the peak maps to -127) at +32, clipped to 31 (a constant row of -0.37 decoded 3.1% off).
    d takes the largest scale's sign (it maps to -32), as llama.cpp's."""
    for v in (0.37, -0.37):
        a = np.full((1, 256), v, np.float32)
        assert np.abs(quantize(a, "IQ4_XS").dequantize() - a).max() < 1e-3, v


@pytest.mark.parametrize("ggml_type", list(FORMATS))
def test_quantize_refuses_values_no_block_holds(ggml_type):
    """A block's scale is f16: weights whose scale passes 65504 are refused by name (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1
    and IQ4_NL wrote inf scales, decoded to inf and NaN; Q4_1's min at |w| 1e5 already); so are NaN and inf
    (ShapeError before, naming no value). Weights near f16's largest still quantize, finite."""
    k = FORMATS[ggml_type].block_weights
    w = np.full((2, 256), 1e9, np.float32)
    w[0] = 1.0
    with pytest.raises(wg.ArgumentError, match=rf"quantize: weights\[1, 0:{k}\] reach \|w\| = 1e\+09, whose "
                                               rf"{ggml_type} block scale is past f16's largest, 65504"):
        quantize(w, ggml_type)
    w[1] = -1e5
    if ggml_type in ("Q4_1", "Q5_1"):   # the min
        with pytest.raises(wg.ArgumentError, match=r"reach \|w\| = 100000"):
            quantize(w, ggml_type)
    else:
        assert np.isfinite(quantize(w, ggml_type).dequantize()).all()
    w[1, 7] = np.nan
    with pytest.raises(wg.ArgumentError, match=r"quantize: weights\[1, 7\] is nan \(1 values not finite\)"):
        quantize(w, ggml_type)


def test_strided_host_words_and_bytes_are_read_in_order(dev):
    """Host words given as a strided view (words[::2]) passed QuantizedWeight's checks, then raw(), dequantize(),
    upload() and stack_rows raised numpy's bare ValueError; a strided memoryview of the bytes made from_bytes raise
    BufferError. Both now read the blocks in order: the same rows as gguf decodes from the contiguous bytes."""
    raw = np.random.default_rng(4).integers(0, 256, (3, 3 * 18), dtype=np.uint8)
    raw[:, 1::18] &= 0x3B   # each block's f16 d finite (|d| < 2)
    want = gguf_dequantize(raw, gguf.GGMLQuantizationType.Q4_0)
    words = QuantizedWeight.from_bytes("Q4_0", (3, 96), raw).blocks
    spread = np.zeros(2 * words.size, np.uint32)
    spread[::2] = words
    strided = QuantizedWeight("Q4_0", (3, 96), spread[::2])
    np.testing.assert_array_equal(strided.raw(), raw)
    np.testing.assert_array_equal(strided.dequantize(), want)
    np.testing.assert_array_equal(stack_rows([strided, strided]).raw(), np.concatenate([raw, raw]))
    np.testing.assert_allclose(wg.ops.embedding([2, 0], strided.upload(dev)).numpy(), want[[2, 0]], rtol=2e-7, atol=0)
    doubled = np.repeat(raw.reshape(-1), 2)
    np.testing.assert_array_equal(QuantizedWeight.from_bytes("Q4_0", (3, 96), memoryview(doubled)[::2]).raw(), raw)


def _set_scale(raw_row: np.ndarray, fmt, which: int, bits: int) -> None:
    """Set the f16 `which` (0: d, 1: the min or dmin) of the first block of a raw row to `bits`."""
    if fmt.name == "IQ1_M":   # d is the top nibbles of the 4 scale words
        words = raw_row[48:56].view("<u2")
        for i in range(4):
            words[i] = (words[i] & 0x0FFF) | (((bits >> (4 * i)) & 0xF) << 12)
    else:
        at = fmt.halves_at + 2 * which
        raw_row[at:at + 2].view("<u2")[0] = bits


@pytest.mark.parametrize("ggml_type", TYPES)
def test_nonfinite_block_scales_pass_through_to_what_reads_them(dev, rng, ggml_type):
    """docs/errors.md `quant-nonfinite-scale`: a block whose f16 d (or min / dmin) is NaN or +-inf, as a hostile or
    broken GGUF file can hold (quantize never makes one), is taken as it is, in every format: the GEMV outputs
    that read the block are NaN for a NaN scale and not finite for an inf one (the kernels multiply the block's
    sums by d: +-inf or NaN, where the float64 sum over the dequantized weights may give NaN), embedding_q's row
    holds the gguf dequantizer's values (NaN and +-inf where it has them), and nothing else moves."""
    fmt = FORMATS[ggml_type]
    n, k = 3, fmt.block_weights
    good = quantize(rng.standard_normal((n, k)).astype(np.float32), ggml_type)
    x = rng.standard_normal((2, k)).astype(np.float32)
    fields = range(2 if fmt.halves == 2 else 1)
    for which in fields:
        for bits in (0x7E00, 0x7C00, 0xFC00):   # NaN, +inf, -inf
            raw = good.raw().copy()
            _set_scale(raw[1], fmt, which, bits)
            qw = QuantizedWeight.from_bytes(ggml_type, (n, k), raw)
            with np.errstate(invalid="ignore", over="ignore"):   # gguf's own inf * 0
                w = gguf_dequantize(qw.raw(), gguf.GGMLQuantizationType[ggml_type]).astype(np.float64)
            assert not np.isfinite(w[1]).all() and np.isfinite(w[[0, 2]]).all()
            got = wg.ops.linear(dev.tensor(x), qw.upload(dev)).numpy()
            want, scale = (x.astype(np.float64) @ w[[0, 2]].T), np.abs(x.astype(np.float64)) @ np.abs(w[[0, 2]]).T
            np.testing.assert_array_less(np.abs(got[:, [0, 2]] - want), 2e-6 * scale + 1e-6)
            case = f"{ggml_type} {'d' if which == 0 else 'min'} {bits:#06x}"
            assert not np.isfinite(got[:, 1]).any(), case
            if bits == 0x7E00:
                assert np.isnan(got[:, 1]).all(), case
            rows = wg.ops.embedding_q([0, 1, 2], qw.upload(dev)).numpy()
            np.testing.assert_allclose(rows, w, rtol=1e-6, atol=1e-6, err_msg=case)   # NaN where w has NaN
