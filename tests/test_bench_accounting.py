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


def _spy_program_us(monkeypatch, programs: dict) -> list:
    """timing.program_us replaced: the real replay (the program's position advances, a step past its rows would be
    flagged at the next readback), the position each replay consumed recorded, and a GPU time told by the program
    (`programs`: program -> µs), so the row's GPU ms says which programs it replayed."""
    from wgraph.bench import timing

    real, seen = timing.program_us, []

    def fake(prog):
        seen.append((prog, int(prog.state("pos").numpy().max())))
        real(prog)
        return programs[prog]

    monkeypatch.setattr(timing, "program_us", fake)
    return seen


def _one_step_dispatches(dev, prog) -> int:
    """Dispatches one run of `prog` makes, counted by dev.stats (not from the program's rows)."""
    dev.sync()
    before = dev.stats.snapshot()
    prog.run()
    dev.sync()
    return dev.stats.since(before).dispatches


def test_model_rows_report_the_programs_the_timed_steps_ran(dev, monkeypatch):
    """A model whose first 8 positions run the short program (forced: lavapipe plans one attention kernel for
    every storage), timed 16 steps from a 1-token prompt: 7 steps at positions 1..7 on the short program, 9 on the
    whole cache's. The row's GPU ms a step were the whole cache's program's alone (3.0 for the 7 * 1.0 + 9 * 3.0
    over 16 = 2.125 here); its dispatches a step are now the two programs' (each counted by dev.stats) weighted
    by their steps, and the short program is replayed only at positions below its rows."""
    import wgraph.models.llama as llama_module
    from wgraph.bench import model as bench_model

    monkeypatch.setattr(llama_module, "short_cache_rows", lambda graph, caps, rows: 8)
    built = []
    real_init = bench_model.SeededLlama.__init__

    def init(self, *a, **k):
        real_init(self, *a, **k)
        built.append(self)

    monkeypatch.setattr(bench_model.SeededLlama, "__init__", init)
    monkeypatch.setattr(bench_model, "TINY", dict(bench_model.TINY, num_hidden_layers=1))

    class ByProgram(dict):
        def __missing__(self, prog):
            m = built[0]
            return 1000.0 if prog is m._short else 3000.0 if prog is m.program else None

    seen = _spy_program_us(monkeypatch, ByProgram())
    row = bench_model.bench_model(dev, "tiny-llama", bench_model.TINY, copy_gbps=None, use_torch=False,
                                  progress=lambda _msg: None)
    assert row["status"] == "ok", row
    m = built[0]
    assert m.short_rows == 8 and m._short is not None
    assert {p for p, _ in seen} == {m._short, m.program}   # before: the whole cache's program alone
    assert all(pos < 8 for p, pos in seen if p is m._short)
    if dev.caps.has_timestamps:
        assert row["gpu_ms_per_token"] == pytest.approx((7 * 1.0 + 9 * 3.0) / 16)
    m.prefill([1])   # the short program's steps at positions below its rows
    short_d, whole_d = _one_step_dispatches(dev, m._short), _one_step_dispatches(dev, m.program)
    assert [(p["program"], p["steps"], p["dispatches"]) for p in row["programs"]] == [("short", 7, short_d),
                                                                                       ("whole", 9, whole_d)]
    assert row["dispatches_per_token"] == pytest.approx((7 * short_d + 9 * whole_d) / 16)


@pytest.fixture(scope="module")
def forced_seeded(dev):
    """The bench's seeded tiny model (one layer) with a 32-position cache whose first 8 positions run the short
    program (forced, as tests/test_decode_span.py does: lavapipe plans one attention kernel for every storage)."""
    import wgraph.models.llama as llama_module
    from wgraph.bench.model import TINY, SeededLlama
    from wgraph.models import LlamaConfig

    real = llama_module.short_cache_rows
    llama_module.short_cache_rows = lambda graph, caps, rows: 8
    try:
        model = SeededLlama(LlamaConfig.from_dict(dict(TINY, num_hidden_layers=1)), dev,
                            dtype="f16" if dev.caps.has_f16 else "f32", max_seq=32)
    finally:
        llama_module.short_cache_rows = real
    assert model.short_rows == 8
    return model


def test_quant_decode_rows_report_the_programs_the_timed_steps_ran(dev, forced_seeded, monkeypatch):
    """quant's decode row, 16 steps from [1] on the forced model: 7 on the short program, 9 on the whole cache's;
    its GPU ms a step were the whole cache's program's alone."""
    m = forced_seeded
    m.generate([1], 2)   # the short program compiled
    seen = _spy_program_us(monkeypatch, {m._short: 1000.0, m.program: 3000.0})
    row = quant._decode_row(dev, m, label="wgraph", steps=16, prompt=[1], copy_gbps=None)
    assert {p for p, _ in seen} == {m._short, m.program}
    assert all(pos < 8 for p, pos in seen if p is m._short)
    if dev.caps.has_timestamps:
        assert row["gpu_ms_per_step"] == pytest.approx((7 * 1.0 + 9 * 3.0) / 16)
    m.prefill([1])
    short_d, whole_d = _one_step_dispatches(dev, m._short), _one_step_dispatches(dev, m.program)
    assert row["dispatches_per_token"] == pytest.approx((7 * short_d + 9 * whole_d) / 16)


def test_batched_model_rows_report_the_programs_the_timed_steps_ran(dev, forced_seeded, monkeypatch):
    """The batched model's row, B = 2, 10 steps from 1-token prompts (each the step's first input, at position
    0) with the batch's short program forced at 8 rows: 8 steps on it (positions 0..7), 2 on the whole caches'
    program; its GPU ms a step were the whole caches' program's alone."""
    import wgraph.models.batched as batched_module
    from wgraph.bench import batched_model

    made = []

    class Forced(batched_module.BatchedDecoder):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

    monkeypatch.setattr(batched_module, "short_cache_rows", lambda graph, caps, rows: 8)
    monkeypatch.setattr(batched_module, "MIN_SHORT_PAGE", 8)
    monkeypatch.setattr(batched_model, "BatchedDecoder", Forced)

    class ByProgram(dict):
        def __missing__(self, prog):
            return 1000.0 if prog is made[0]._short else 3000.0 if prog is made[0].program else None

    seen = _spy_program_us(monkeypatch, ByProgram())
    row = batched_model._wgraph_row(dev, forced_seeded, 2, 10, lambda _msg: None, False)
    dec = made[0]
    assert dec.short_rows == 8 and dec._short is not None
    assert {p for p, _ in seen} == {dec._short, dec.program}
    assert all(pos < 8 for p, pos in seen if p is dec._short)
    if dev.caps.has_timestamps:
        assert row["gpu_ms_per_step"] == pytest.approx((8 * 1.0 + 2 * 3.0) / 10)
    dec.prefill([[1], [2]])
    short_d, whole_d = _one_step_dispatches(dev, dec._short), _one_step_dispatches(dev, dec.program)
    assert [(p["program"], p["steps"]) for p in row["programs"]] == [("short", 8), ("whole", 2)]
    assert row["dispatches_per_step"] == pytest.approx((8 * short_d + 2 * whole_d) / 10)


def _doubling_calls(dev, x, calls: int):
    """(a Program of `calls` calls of scale(x, 2.0) on a state holding x, its builder) made by the bench's timer."""
    import wgraph as wg
    from wgraph.bench import timing

    def build(g, i):
        if i == 0:
            build.st = timing.states(g, (x,), ("f32",))
        return wg.ops.scale(build.st[0], 2.0)

    return timing.compile_calls(dev, build, calls), build


def test_replay_timer_waits_for_the_gpu_once_per_phase_not_per_replay(dev):
    """timing.replay_time (the bench's decode/batched replay column and the A/B scripts'): replays go through
    run_many's in-flight window, and the GPU is read back once after the first run, once after the warm replays
    and once after the timed ones, however many replays there are (the old timer read back every 4 replays,
    leaving the GPU idle through each round trip). Every timed replay and warm replay is a submit of its own."""
    from wgraph.bench import timing

    x = np.arange(64, dtype=np.float32)
    prog, _ = _doubling_calls(dev, x, 3)
    np.testing.assert_array_equal(prog.run()["out2"].numpy(), x * 2.0)   # each call's output is its own, computed
    dev.sync()
    before = dev.stats.snapshot()
    t = timing.replay_time(dev, prog, 3, min_s=0.05, warm_s=0.01)
    done = dev.stats.since(before)
    assert done.readbacks == 3
    assert done.submits >= 1 + 4 + 3 and done.submits - 1 - 3 > 4   # more replays than one old sync interval
    assert t.us_per_call > 0 and isinstance(t.gpu_bound, bool)


def test_replay_timer_reports_the_hosts_share(dev, monkeypatch):
    """replay_time's host_us_per_call is the timed replays' own host seconds (what run_many returns) over the calls
    they made, and gpu_bound says whether that is under 0.8 of the wall time (a host-bound replay's time is the
    host's, not the kernels')."""
    from wgraph.bench import timing

    prog, _ = _doubling_calls(dev, np.arange(16, dtype=np.float32), 2)
    seen = []
    real = prog.run_many

    def counted(n, **kw):
        host = real(n, **kw)
        seen.append((n, host))
        return host

    monkeypatch.setattr(prog, "run_many", counted)
    t = timing.replay_time(dev, prog, 2, min_s=0.02, warm_s=0.0)
    reps, host = seen[-1]          # the timed replays are the last run_many
    assert t.host_us_per_call == pytest.approx(host / (reps * 2) * 1e6)
    assert 0 < t.host_us_per_call and t.gpu_bound == (t.host_us_per_call < 0.8 * t.us_per_call)
    assert timing.ReplayTime(10.0, 7.9).gpu_bound and not timing.ReplayTime(10.0, 8.0).gpu_bound


def test_replay_timer_refuses_a_program_of_no_calls(dev):
    """`calls` divides the replay time: 0 calls (a Program that compile_calls made of none) was a ZeroDivisionError
    after the replays; it is an ArgumentError before any GPU work. warm_s=0 still replays (and times) the Program."""
    import wgraph as wg
    from wgraph.bench import timing

    prog, build = _doubling_calls(dev, np.arange(8, dtype=np.float32), 1)
    with pytest.raises(wg.ArgumentError, match="calls"):
        timing.replay_time(dev, prog, 0, min_s=0.0, warm_s=0.0)
    with pytest.raises(wg.ArgumentError, match="calls"):
        timing.replay(dev, build, 0)
    t = timing.replay_time(dev, prog, 1, min_s=0.0, warm_s=0.0)
    assert t.us_per_call > 0
