"""The bench's accounting against counts made here from first principles: FLOPs from numpy's causal masks, bytes
from the nbytes of the arrays the bench makes (or would make), GGML block sizes from the `gguf` package, and the
GB/s of a torch row on what torch itself reads and writes (its time stubbed: no CUDA here)."""

import numpy as np
import pytest

from wgraph.bench import batched, gemm, gemv, grids, quant


def _mask_pairs(S: int, L: int, causal: bool) -> int:
    """(query, key) pairs a bottom-right aligned causal mask (query i sees keys 0 .. L - S + i) leaves."""
    return int(np.tril(np.ones((S, L), bool), k=L - S).sum()) if causal else S * L


@pytest.mark.parametrize("S, L", [(3, 7), (1, 5), (2, 9), (4, 2), (8, 2), (10, 3), (6, 6)])
def test_attention_flops_count_the_unmasked_pairs(S, L):
    """4 flops a (query, key) pair a head-dim element (QK^T and PV), the pairs counted exactly for S != L (S > L:
    the first S - L queries see no key; the formula for S < L went negative at S = 8, L = 2) and halved for
    S == L (the FlashAttention convention); not causal: every pair."""
    Hq, D = 4, 16
    s = grids.Shape("prefill", S, L, Hq, 2, D, "f16")
    want = S * L / 2 if S == L else _mask_pairs(S, L, True)
    assert grids.flops(s) == 4 * want * Hq * D
    assert grids.flops(grids.Shape("prefill", S, L, Hq, 2, D, "f16", causal=False)) == 4 * S * L * Hq * D


@pytest.mark.parametrize("dtype", ["f32", "f16", "f16kv"])
def test_attention_decode_bytes_are_the_arrays_the_bench_attends(dev, dtype):
    """Decode bytes = K + V + Q read and the output written: the nbytes of the bench's own tensors."""
    import wgraph as wg
    from wgraph.bench.attention import _inputs

    s = grids.Shape("decode", 1, 24, 4, 2, 16, dtype)
    _, (q, k, v) = _inputs(dev, s, np.random.default_rng(0))
    out = wg.ops.attention(q, k, v, causal=True)
    assert grids.bytes_moved(s) == sum(t.numpy().nbytes for t in (q, k, v, out))


def test_batched_decode_bytes_are_the_keys_each_sequence_sees():
    """A ragged batch reads each sequence's own cached keys (cache_seqlens), not the padded capacity; the varlen
    prefill counts each causal sequence at S * S / 2 pairs (the convention of the S == L rows)."""
    s = batched.BatchedShape("decode", (5, 12, 1), 4, 2, 16, "f16")
    q, k, v = batched._arrays(s, np.random.default_rng(0))
    seen = sum(k[b, :n].nbytes + v[b, :n].nbytes for b, n in enumerate(s.lengths))
    assert batched.bytes_moved(s) == seen + 2 * q.nbytes  # out: q's shape and dtype
    p = batched.BatchedShape("varlen", (5, 12, 1), 4, 2, 16, "f16")
    assert batched.flops(p) == sum(4 * n * n / 2 * 4 * 16 for n in p.lengths)


@pytest.mark.parametrize("shape", [gemv.GemvShape(1, 64, 256, "f32"), gemv.GemvShape(8, 48, 96, "f16"),
                                   gemv.GemvShape(2, 64, 256, "f16", norm=True, swiglu=True, residual=True),
                                   gemv.GemvShape(1, 40, 128, "f32", residual=True)])
def test_gemv_bytes_are_the_nbytes_of_its_arrays(shape):
    """W once, x for every row, y (half of W's rows with swiglu), the residual and the norm weight, f32 but W."""
    np_w = np.float16 if shape.weight_dtype == "f16" else np.float32
    n_out = shape.out_features // 2 if shape.swiglu else shape.out_features
    arrays = [np.zeros((shape.out_features, shape.in_features), np_w), np.zeros((shape.rows, shape.in_features),
                                                                                np.float32),
              np.zeros((shape.rows, n_out), np.float32)]
    arrays += [np.zeros((shape.rows, n_out), np.float32)] * shape.residual
    arrays += [np.zeros(shape.in_features, np.float32)] * shape.norm
    assert shape.weight_bytes == arrays[0].nbytes and shape.bytes == sum(a.nbytes for a in arrays)


def test_quant_gemv_bytes_are_gguf_block_sizes_for_every_format():
    """Each of the bench's formats: rows x (in / block weights) blocks of GGML_QUANT_SIZES' bytes."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    assert len(quant.TYPES) == 19
    for t in quant.TYPES:
        weights, nbytes = GGML_QUANT_SIZES[GGMLQuantizationType[t]]
        s = quant.QuantGemvShape(t, 3, 96, 512, "x", norm=True)
        assert s.weight_bytes == 96 * (512 // weights) * nbytes, t
        assert s.bytes == s.weight_bytes + 4 * 3 * (512 + 96) + 4 * 512, t


def test_gemm_flops_are_two_a_multiply_add():
    assert gemm.GemmShape(37, 3072, 576, "f16").flops == 2 * 37 * 3072 * 576


def test_quant_torch_f16_gbps_counts_f16_x_and_y(dev, monkeypatch):
    """torch's f16 GEMV reads W, x and writes y all in f16 (x and y were counted at 4 bytes); its time stubbed."""
    monkeypatch.setattr(quant, "_torch_gemv_us", lambda *a, **k: 10.0)
    s = quant.QuantGemvShape("Q4_0", 8, 64, 256, "small")
    (row,) = quant.bench_quant_gemv(dev, [s], copy_gbps=None, all_variants=False, use_torch=True, target_s=0.001,
                                    progress=lambda _: None)
    torch_bytes = sum(np.zeros(shape, np.float16).nbytes for shape in ((64, 256), (8, 256), (8, 64)))
    assert row["torch_f16_us"] == 10.0
    assert row["torch_f16_gbps"] == pytest.approx(torch_bytes / 10e-6 / 1e9)


@pytest.mark.parametrize("shape", [gemv.GemvShape(2, 64, 256, "f16"),
                                   gemv.GemvShape(1, 64, 256, "f16", norm=True, swiglu=True, residual=True)])
def test_gemv_torch_gbps_counts_what_f_linear_moves(dev, monkeypatch, shape):
    """torch's row is F.linear alone with x cast to the weights' dtype: W, x and all out_features of y in f16,
    no norm weight or residual (wgraph's f32 x and y, and a fused row's extras, were counted)."""
    monkeypatch.setattr(gemv, "_torch_linear", lambda s, st, reps: {
        "torch_us": 10.0, "output": np.zeros((s.rows, s.outputs), np.float32)})
    (row,) = gemv.bench_gemv(dev, [shape], copy_gbps=None, use_torch=True, torch_available=True, rounds=1,
                             target_us=10.0, max_reps=4)
    arrays = [np.zeros((shape.out_features, shape.in_features), np.float16),
              np.zeros((shape.rows, shape.in_features), np.float16), np.zeros((shape.rows, shape.out_features),
                                                                              np.float16)]
    assert row["status"] == "ok" and row["torch_us"] == 10.0
    assert row["torch_gbps"] == pytest.approx(sum(a.nbytes for a in arrays) / 10e-6 / 1e9)
    assert row["ratio_to_torch"] == pytest.approx(10.0 / row["gpu_us"])
