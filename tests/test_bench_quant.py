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


def test_a_planned_row_has_its_same_bytes_read_ceiling(dev):
    """With the copy bandwidth known, the planned row carries the read kernel's time over the row's own bytes
    (16-byte words) and that rate as a fraction of the copy bandwidth."""
    s = quant.QuantGemvShape("Q4_0", 1, 64, 256, "norm+small", norm=True)
    (row,) = quant.bench_quant_gemv(dev, [s], copy_gbps=1.0, all_variants=False, use_torch=False, target_s=0.001,
                                    progress=lambda _: None)
    assert row["status"] == "ok" and row["read_same_bytes_us"] > 0
    read = s.bytes // 16 * 16
    assert read == 64 * 8 * 18 + 4 * 256 + 4 * 64 + 4 * 256  # blocks (64 rows of 8), x, y, norm weight: 11,520
    assert row["read_same_bytes_fraction"] * 1e9 * row["read_same_bytes_us"] * 1e-6 == pytest.approx(read)
    assert row["of_size_ceiling"] == pytest.approx(row["fraction_of_copy"] / row["read_same_bytes_fraction"])


def test_step_gemv_sums_count_each_call_of_the_1b_step():
    """16 layers x (norm+qkv, o_proj, gate_up, down) + one lm_head, planned rows of one row of x only; a format
    without a ceiling on every call is left out."""
    def row(t, matrix, us, ceil, rows=1, planned=True):
        return {"ggml_type": t, "matrix": matrix, "rows": rows, "planned": planned, "status": "ok", "gpu_us": us,
                "read_same_bytes_us": ceil}

    times = {"norm+qkv": (7.0, 3.0), "o_proj+residual": (6.0, 2.5), "norm+gate_up+swiglu": (11.0, 6.0),
             "down_proj+residual": (8.0, 4.0), "norm+lm_head": (80.0, 40.0)}
    rows = [row("Q4_0", m, us, c) for m, (us, c) in times.items()]
    rows += [row("Q4_0", "norm+qkv", 1.0, 1.0, planned=False), row("Q4_0", "down_proj+residual", 1.0, 1.0, rows=8)]
    rows += [row("Q8_0", m, us, c) for m, (us, c) in times.items() if m != "norm+lm_head"]
    (s,) = quant.step_gemv_sums(rows, 16)
    assert s["ggml_type"] == "Q4_0" and s["dispatches"] == 65
    assert s["planned_us"] == pytest.approx(16 * (7 + 6 + 11 + 8) + 80)      # 592
    assert s["read_ceiling_us"] == pytest.approx(16 * (3 + 2.5 + 6 + 4) + 40)  # 288


def test_distinct_outputs_are_distinct_with_one_weight_copy(dev, monkeypatch):
    """The planned row's `distinct_outputs_gpu_us` (the table's "indep us") times calls writing different outputs;
    with one weight copy (a CPU adapter: copies = 1) every call wrote the one output, the dependent chain again."""
    outs = set()
    linear_q = wg.ops.linear_q

    def spy(*a, out=None, **kw):
        outs.add(id(out))
        return linear_q(*a, out=out, **kw)

    monkeypatch.setattr(wg.ops, "linear_q", spy)
    monkeypatch.setattr(quant, "CACHE_BYTES", 0)   # one weight copy on any adapter, as on a CPU one
    s = quant.QuantGemvShape("Q4_0", 1, 64, 256, "norm+small", norm=True)
    (row,) = quant.bench_quant_gemv(dev, [s], copy_gbps=None, all_variants=False, use_torch=False, target_s=0.001,
                                    progress=lambda _: None)
    assert row["status"] == "ok" and row["weight_copies"] == 1 and row["distinct_outputs_gpu_us"] > 0
    assert len(outs) > 1
