"""The quantized GEMV bench's accounting (bytes a fused call reads, counted by hand) and one of its rows on
this device: the planned kernel, its output checked against float64 with gguf's dequantizer."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.bench import quant


def test_bytes_of_a_fused_call():
    s = quant.QuantGemvShape("Q4_0", 1, 16384, 2048, "norm+gate_up+swiglu", norm=True, swiglu=True)
    # blocks: 16384 rows of 64 blocks of 18 bytes; x 2048 f32; y 8192 f32 (swiglu halves); norm weight 2048 f32
    assert s.bytes == 16384 * 64 * 18 + 4 * 2048 + 4 * 8192 + 4 * 2048
    r = quant.QuantGemvShape("Q4_K", 2, 2048, 8192, "down_proj+residual", residual=True)
    # 2048 rows of 32 super-blocks of 144 bytes; x 2 x 8192 f32; y and residual 2 x 2048 f32 each
    assert r.bytes == 2048 * 32 * 144 + 4 * 2 * 8192 + 2 * 4 * 2 * 2048
    assert r.fused == ("residual",) and s.fused == ("rmsnorm", "swiglu")


def test_a_bench_row_checks_the_planned_kernel(dev):
    s = quant.QuantGemvShape("Q4_K", 1, 96, 512, "wide+swiglu+residual", swiglu=True, residual=True)
    (row,) = quant.bench_quant_gemv(dev, [s], copy_gbps=None, all_variants=False, use_torch=False, target_s=0.001,
                                    progress=lambda _: None)
    assert row["status"] == "ok" and row["planned"] and row["gpu_us"] > 0
    assert row["variant"] == wg.ops.plan_linear_q(1, 96, 512, "Q4_K", swiglu=True, caps=dev.caps).variant
    assert row["max_rel_err_vs_float64"] < 1e-5


@pytest.mark.parametrize("ggml_type", ["Q6_K", "Q3_K", "Q2_K"])
def test_a_bench_row_of_trailing_scales_has_valid_random_blocks(dev, ggml_type):
    """Q6_K's and Q3_K's d and Q2_K's d and dmin trail their blocks: the bench's random blocks put small scales
    there (random bytes could be inf), small enough that every weight stays below 1."""
    s = quant.QuantGemvShape(ggml_type, 1, 40, 512, "norm+small", norm=True)
    (row,) = quant.bench_quant_gemv(dev, [s], copy_gbps=None, all_variants=False, use_torch=False, target_s=0.001,
                                    progress=lambda _: None)
    assert row["status"] == "ok" and row["max_rel_err_vs_float64"] < 1e-5


def test_random_blocks_are_valid_in_every_format():
    """Every format's scales where FORMATS says they are (halves_at, halves): random quants under them give finite
    weights below 20 (random bytes read as an f16 scale reach 65504, or inf), not all zero."""
    from wgraph.ggml_blocks import FORMATS

    for t in FORMATS:
        w = quant.random_blocks(t, 3, 256, np.random.default_rng(0)).dequantize()
        assert np.isfinite(w).all() and (abs(w) < 20).all() and (abs(w) > 0).any(), t
