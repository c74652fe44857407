"""lavapipe stops an invocation's loops after 65,535 iterations in total, silently: on a CPU device the planner
keeps every invocation under it (wgraph/ops/attention_loops.py), at lengths on both sides of the old breaking
points (tiled_large, D <= 64: 1793 keys; 16 queries x 4096 keys, D=256, f16kv: error 398)."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.device import Caps
from wgraph.ops.attention_loops import BOUNDS, CPU_LOOP_LIMIT, loop_iterations
from wgraph.ops.attention_planner import PlanFacts, attention_kernels, plan
from wgraph.kernels.registry import registry

from attention_reference import tolerance_check
from kernel_support import TIERED_HOT, skip_unless_f16

CPU = Caps.synthetic(is_cpu=True, has_f16=True, has_subgroups=True, subgroup_min_size=4, subgroup_max_size=128,
                     max_workgroup_storage=32768, max_invocations_per_workgroup=1024)


def test_every_attention_kernel_file_has_a_loop_bound():
    files = {k.file for k in attention_kernels()}
    files |= {registry()[k.facts[r]].file for k in attention_kernels() for r in ("combine",) if r in k.facts}
    files.discard("attention_decode_combine.wgsl")          # counted with its main kernel (chunks)
    files.discard("attention_decode_splitk_combine.wgsl")
    assert files <= set(BOUNDS), files - set(BOUNDS)


@pytest.mark.parametrize("phase", ["prefill", "decode"])
@pytest.mark.parametrize("dtype", ["f32", "f16kv"])
@pytest.mark.parametrize("d", [32, 64, 128, 256, 512])
def test_cpu_plans_stay_under_the_cap(phase, dtype, d):
    for span in (100, 1792, 1793, 4096, 20000, 300000):
        facts = PlanFacts(phase, dtype, 1 if phase == "decode" else 16, 4, d, span, num_kv_heads=2)
        p = plan(facts, CPU)
        assert loop_iterations(registry()[p.variant], facts, CPU) <= CPU_LOOP_LIMIT, p.explain()
        for variant, why in p.rejected:
            k = registry().get(variant)
            if k is not None and "loop iterations" in why:
                assert loop_iterations(k, facts, CPU) > CPU_LOOP_LIMIT


def test_the_old_breaking_points_are_planned_away():
    p = plan(PlanFacts("prefill", "f32", 4, 1, 64, 1793), CPU)
    assert p.variant != "prefill_tiled_large_f32"
    assert "a CPU device (lavapipe) stops at 65535" in dict(p.rejected)["prefill_tiled_large_f32"]
    p = plan(PlanFacts("prefill", "f16kv", 16, 1, 256, 4096), CPU)
    assert p.variant == "prefill_streaming_f16kv" and "loop iterations" in dict(p.rejected)["prefill_tiled_small_f16kv"]
    gpu_without_subgroups = Caps.synthetic(has_f16=True, max_workgroup_storage=32768)
    assert plan(PlanFacts("prefill", "f32", 4, 1, 64, 1793), gpu_without_subgroups).variant == "prefill_tiled_large_f32"
    with pytest.raises(wg.LimitError, match=r"forced attention variant prefill_tiled_large_f32 does not fit: it "
                                            r"would run up to \d+ loop iterations in one invocation at kv span 1793"):
        plan(PlanFacts("prefill", "f32", 4, 1, 64, 1793), CPU, "prefill_tiled_large_f32")


def _run(dev, rng, S, L, D, dtype, causal):
    q = rng.standard_normal((S, 1, D)).astype(np.float32)
    kv_np = np.float16 if dtype == "f16kv" else np.float32
    k, v = (rng.standard_normal((L, 1, D)).astype(kv_np) for _ in range(2))
    got = wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(v), causal=causal).numpy()
    ok, err, _, bound = tolerance_check(got, q, k, v, out_dtype=np.float32, causal=causal)
    assert ok, (S, L, D, dtype, err, bound)


@pytest.mark.parametrize("L", [1792, 1793])
def test_tiled_large_breaking_point(dev, rng, L):
    _run(dev, rng, 32, L, 64, "f32", causal=False)  # a full block of 32 queries: every score pass runs a dot


@pytest.mark.skipif("not wg.default_device().caps.has_f16")
def test_long_kv_d256_f16kv(dev, rng):
    _run(dev, rng, 16, 4096, 256, "f16kv", causal=True)


def test_chunked_prefill_past_streaming(dev, rng):
    # head_dim 512 over 4000 keys: past streaming's bound (63 chunks of 64 keys at ~1057 iterations each)
    facts = PlanFacts("prefill", "f32", 3, 1, 512, 4000)
    if dev.caps.is_cpu:
        assert plan(facts, dev.caps).variant == "prefill_chunked_f32"
    _run(dev, rng, 3, 4000, 512, "f32", causal=True)


def test_tiered_decode_past_the_cap_raises_on_a_cpu_device(dev, rng):
    # tiered_loop walks every key in one invocation and has no other kernel: past the cap it is an error
    from wgraph.ops.attention_loops import decode_loop_iterations
    from wgraph.ops.tiered import tiered_attention

    k = registry()["tiered_f16kv"]
    assert decode_loop_iterations(k, 16, 8000) <= CPU_LOOP_LIMIT < decode_loop_iterations(k, 16, 9000)
    if not dev.caps.is_cpu:
        pytest.skip("the cap is lavapipe's")
    skip_unless_f16(dev, why=TIERED_HOT)
    hot = dev.tensor(np.zeros((8, 1, 16), np.float16))
    cold = dev.tensor(np.zeros((9000, 1, 16), np.float16))
    q = dev.tensor(np.ones((1, 1, 16), np.float32))
    before = dev.stats.snapshot()
    with pytest.raises(wg.LimitError, match=r"tiered_attention: 9000 keys at head_dim 16 would run up to \d+ loop "
                                            r"iterations in one invocation of tiered_f16kv"):
        tiered_attention(q, hot, hot, cold, cold, causal=True, kv_len=9000)
    assert dev.stats.since(before).submits == 0
