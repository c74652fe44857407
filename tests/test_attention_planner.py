"""The attention planner with synthetic caps (every capability combination) against an independent
expectation table, kernel paths, and bad input rejected with the numbers before any GPU work."""

import itertools

import numpy as np
import pytest

import wgraph as wg
from wgraph.device import Caps
from wgraph.kernels.registry import registry
from wgraph.ops.attention_planner import PlanFacts, plan

from kernel_support import skip_unless_f16


# Workgroup memory of split-K g1 (one q head per kv head, as in GRID) by dtype, from the shader's arrays.
SPLITK_G1_BYTES = {"f32": 8456, "f16": 8328, "f16kv": 8328}
# Fused split-K g1 (GPUs with subgroups): head dims per lane and workgroup memory by dtype.
FUSED_G1 = {"f32": (8, 4096), "f16": (8, 4096), "f16kv": (8, 4096)}
# One-pass decode (GPUs with subgroups): head dims per lane and workgroup memory (256 threads x those dims of f32) by
# dtype, and the most keys it is planned for.
SINGLE = {"f32": (8, 8192), "f16": (16, 16384), "f16kv": (16, 16384)}
SINGLE_MAX_KV_SPAN = 512


def expected(phase, dtype, d, span, subgroups, f16, mem, cpu, head_rows):
    """Written out by hand from the kernels' declared limits (max head dims 64/256/512, workgroup memory
    20480 / 12480 / 512 bytes, chunk 256 keys x 4; split-K: head_dim % 8 == 0 and <= 256, SPLITK_G1_BYTES,
    no subgroups needed; fused split-K on GPUs with subgroups: FUSED_G1, head_dim / dims per lane a power of
    two; flash prefill on GPUs with subgroups only: head-dim classes 64 / 128 / 256 needing
    8192 / 8192 / 16384 bytes (f16: 6144 / 6144 / 12288)); one-pass decode before them all: SINGLE. head_rows:
    the prefill's query rows x heads."""
    if dtype != "f32" and not f16:
        return None
    if phase == "decode":
        per, need = SINGLE[dtype]
        if (subgroups and not cpu and span <= SINGLE_MAX_KV_SPAN and d % per == 0 and (d // per) & (d // per - 1) == 0
                and d <= 256 and mem >= need):
            return f"decode_single_{dtype}"
        per, need = FUSED_G1[dtype]
        if subgroups and not cpu and d % per == 0 and (d // per) & (d // per - 1) == 0 and d <= 256 and mem >= need:
            return f"decode_fused_g1_{dtype}"
        if d % 8 == 0 and d <= 256 and mem >= SPLITK_G1_BYTES[dtype]:
            return f"decode_splitk_g1_{dtype}"
        if span >= 1024 and d <= 512:
            return f"decode_chunked_{dtype}"
        if subgroups and d <= 256:
            return f"decode_subgroup_{dtype}"
        return f"decode_streaming_{dtype}" if d <= 512 else None
    if not cpu and subgroups and d % 4 == 0:
        # the GEMM-shaped kernels, workgroup memory in two phases (max(Q + K chunks, p + V chunk) vec4s + one f32 a
        # row: max(64 x 5 + 64 x 5, 64 x 16 + 16 x 16) x 16 + 256 = 20736 bytes at D 64, the same at D 128 with
        # 8-key V chunks, 8 x 32): f32 for D <= 64 and 65..128, f16 for D 65..128 and for D <= 64 up to 32768 query
        # rows x heads (an H100 A/B); the rest stay experimental (the A/Bs did not confirm them)
        if dtype == "f32" and d <= 128 and mem >= 20736:
            return f"prefill_gemm_d{64 if d <= 64 else 128}_f32"
        if dtype == "f16" and d <= 64 and head_rows <= 32768 and mem >= 20736:
            return "prefill_gemm_d64_f16"
        if dtype == "f16" and 64 < d <= 128 and mem >= 20736:
            return "prefill_gemm_d128_f16"
        for cls, need in ((64, 8192), (128, 8192), (256, 16384)):
            need = need * 3 // 4 if dtype == "f16" else need
            if d <= cls and mem >= need:
                return f"prefill_flash_d{cls}_{dtype}"
    if cpu and span == 5000:
        # lavapipe's loop cap (65535 per invocation, every loop counted; wgraph/ops/attention_loops.py): the tiled
        # kernels walk the block's whole key range (> 150 tiles here, > 300 iterations each); streaming walks it in
        # chunks of 64 keys at (head_dim + 545) each, 79 chunks: under the cap up to head_dim 256; 512 goes chunked.
        if d <= 256:
            return f"prefill_streaming_{dtype}"
        return f"prefill_chunked_{dtype}"
    if d <= 64 and mem >= 20480:
        return f"prefill_tiled_large_{dtype}"
    if d <= 256 and mem >= 12480:
        return f"prefill_tiled_small_{dtype}"
    return f"prefill_streaming_{dtype}" if d <= 512 else None


GRID = list(itertools.product(("prefill", "decode"), ("f32", "f16", "f16kv"), (32, 64, 80, 100, 256, 512),
                              (100, 5000), (False, True), (False, True), (8192, 16384, 32768), (False, True)))


@pytest.mark.parametrize("phase,dtype,d,span,subgroups,f16,mem,cpu", GRID)
def test_plan_matches_expectation(phase, dtype, d, span, subgroups, f16, mem, cpu):
    caps = Caps.synthetic(has_subgroups=subgroups, has_f16=f16, max_workgroup_storage=mem, is_cpu=cpu)
    facts = PlanFacts(phase, dtype, 1 if phase == "decode" else 33, 8, d, span)
    want = expected(phase, dtype, d, span, subgroups, f16, mem, cpu, facts.seq_len * facts.num_heads)
    if want is None:
        with pytest.raises(wg.UnsupportedError, match="no attention kernel"):
            plan(facts, caps)
        return
    p = plan(facts, caps)
    assert p.variant == want, p.explain()
    if phase == "decode":
        assert p.variant.startswith("decode"), "a decode call always gets a decode kernel"
    assert all(w >= 1 for w in p.workgroups) and p.reason


def test_plan_table_rows():
    sg = Caps.synthetic(has_subgroups=True, has_f16=True, max_workgroup_storage=32768)
    cpu = Caps.synthetic(has_subgroups=True, has_f16=True, max_workgroup_storage=32768, is_cpu=True)
    p = plan(PlanFacts("prefill", "f32", 100, 8, 64, 100), cpu)
    assert (p.variant, p.tier, p.workgroups) == ("prefill_tiled_large_f32", "tiled_large", (8, 4, 1))
    assert "GPU-tuned" in dict(p.rejected)["prefill_flash_d64_f32"]
    p = plan(PlanFacts("prefill", "f16", 100, 8, 128, 100), cpu)
    assert (p.variant, p.workgroups) == ("prefill_tiled_small_f16", (8, 13, 1))
    # the GEMM-shaped kernel: 64 queries per workgroup, 20736 bytes of workgroup memory, f32 and f16 at any length
    p = plan(PlanFacts("prefill", "f32", 4096, 32, 128, 4096), sg)
    assert (p.variant, p.tier, p.workgroups) == ("prefill_gemm_d128_f32", "gemm", (32, 64, 1))
    assert dict(p.rejected)["prefill_gemm_d64_f32"] == "takes head_dim <= 64; got 128"
    p = plan(PlanFacts("prefill", "f16", 4096, 32, 128, 4096), sg)
    assert (p.variant, p.tier, p.workgroups) == ("prefill_gemm_d128_f16", "gemm", (32, 64, 1))
    small = Caps.synthetic(has_subgroups=True, has_f16=True, max_workgroup_storage=20735)
    assert "needs 20736 bytes" in dict(plan(PlanFacts("prefill", "f16", 4096, 32, 128, 4096), small).rejected)[
        "prefill_gemm_d128_f16"]
    # f16 at D <= 64: the GEMM-shaped d64 entry up to 32768 query rows x heads, the flash kernel above (d128 is for
    # D >= 65)
    p = plan(PlanFacts("prefill", "f16", 4096, 32, 64, 4096), sg)
    assert (p.variant, p.tier, p.workgroups) == ("prefill_flash_d64_f16", "flash", (32, 32, 1))
    assert dict(p.rejected)["prefill_gemm_d128_f16"] == "is for head_dim >= 65; got 64"
    assert dict(p.rejected)["prefill_gemm_d64_f16"] == "131072 query rows x heads > 32768, where it is slower"
    p = plan(PlanFacts("prefill", "f16", 2048, 16, 64, 2048), sg)
    assert (p.variant, p.tier, p.workgroups) == ("prefill_gemm_d64_f16", "gemm", (16, 32, 1))
    assert plan(PlanFacts("prefill", "f16", 2049, 16, 64, 2049), sg).variant == "prefill_flash_d64_f16"
    # flash: 128 queries per workgroup for head dims up to 64, 64 above (a device with 16 KB)
    small = Caps.synthetic(has_subgroups=True, has_f16=True, max_workgroup_storage=16384)
    p = plan(PlanFacts("prefill", "f16", 4096, 32, 128, 4096), small)
    assert (p.variant, p.tier, p.workgroups) == ("prefill_flash_d128_f16", "flash", (32, 64, 1))
    assert dict(p.rejected)["prefill_flash_d64_f16"] == "takes head_dim <= 64; got 128"
    p = plan(PlanFacts("prefill", "f16kv", 300, 8, 64, 300), sg)
    assert (p.variant, p.workgroups) == ("prefill_flash_d64_f16kv", (8, 3, 1))
    p = plan(PlanFacts("prefill", "f16", 33, 4, 256, 33), sg)
    assert (p.variant, p.workgroups) == ("prefill_flash_d256_f16", (4, 1, 1))
    p = plan(PlanFacts("decode", "f16kv", 1, 8, 100, 2000), Caps.synthetic(has_f16=True))
    assert (p.variant, p.max_chunks, p.dispatches[1]) == ("decode_chunked_f16kv", 8,
                                                            ("decode_chunked_combine_f16kv", (1, 8, 1)))
    # split-K (a device without subgroups: no fused kernel): SPLIT_TARGET workgroups wanted (g1, g8: 512; g4: 256)
    # over (chunks, kv heads, blocks of G_TILE q heads); chunks are whole 64-key steps of at most CHUNK_MAX keys.
    # Group 4 -> g4, one block; 256 // 8 = 32 chunks wanted, raised to 32768 / CHUNK_MAX 512 = 64 chunks of 512.
    sg = Caps.synthetic(has_f16=True, max_workgroup_storage=32768)
    p = plan(PlanFacts("decode", "f16kv", 1, 32, 128, 32768, num_kv_heads=8), sg)
    assert (p.variant, p.tier, p.workgroups, p.max_chunks) == ("decode_splitk_g4_f16kv", "splitk", (64, 8, 1), 64)
    assert p.dispatches[1] == ("decode_splitk_combine_f32", (1, 32, 1))
    # group 16 -> g8 in two blocks: 512 // 8 = 64 chunks wanted, but 1000 keys make only 16 steps
    p = plan(PlanFacts("decode", "f16", 1, 64, 128, 1000, num_kv_heads=4), sg)
    assert (p.variant, p.workgroups, p.max_chunks) == ("decode_splitk_g8_f16", (16, 4, 2), 16)
    # group 1 -> g1: 512 // 32 = 16 chunks wanted; 5000 / 16 = 313 keys, rounded up to 320: 16 chunks
    p = plan(PlanFacts("decode", "f32", 1, 32, 128, 5000, num_kv_heads=32), sg)
    assert (p.variant, p.workgroups, p.max_chunks) == ("decode_splitk_g1_f32", (16, 32, 1), 16)
    p = plan(PlanFacts("decode", "f32", 1, 32, 128, 4500, num_kv_heads=32), sg)   # 282 -> 320 keys: 15 chunks
    assert (p.workgroups, p.max_chunks) == ((15, 32, 1), 16)
    p = plan(PlanFacts("decode", "f32", 1, 8, 100, 100), Caps.synthetic(has_subgroups=True, max_workgroup_storage=32768))
    assert p.variant == "decode_subgroup_f32" and "multiple of 8" in dict(p.rejected)["decode_splitk_g1_f32"]
    p = plan(PlanFacts("decode", "f32", 1, 8, 100, 100), Caps.synthetic())
    assert (p.variant, p.workgroups) == ("decode_streaming_f32", (1, 8, 1))
    assert "subgroup" in dict(p.rejected)["decode_subgroup_f32"]


@pytest.mark.parametrize("group,want", [(1, "g1"), (2, "g4"), (4, "g4"), (5, "g8"), (8, "g8"), (16, "g8")])
def test_splitk_block_size_follows_the_head_group(group, want):
    # the first split-K kernel whose max_q_per_kv (g1: 1, g4: 4, g8: any) admits the group; the others say why
    caps = Caps.synthetic(has_f16=True, max_workgroup_storage=32768)
    p = plan(PlanFacts("decode", "f16", 1, 4 * group, 64, 4096, num_kv_heads=4), caps)
    assert p.variant == f"decode_splitk_{want}_f16"
    g_tile = int(want[1:])
    assert p.workgroups[1:] == (4, -(-group // g_tile))
    if want != "g1":
        assert f"serves at most 1 q heads per kv head; the call has {group}" in dict(p.rejected)["decode_splitk_g1_f16"]


def test_forced_splitk_block_rejects_a_larger_group():
    caps = Caps.synthetic(has_f16=True, max_workgroup_storage=32768)
    with pytest.raises(wg.LimitError, match=r"serves at most 4 q heads per kv head; the call has 8 \(32/4\)"):
        plan(PlanFacts("decode", "f16", 1, 32, 128, 4096, num_kv_heads=4), caps, "decode_splitk_g4_f16")


def test_splitk_chunks_never_exceed_chunk_max():
    # 64 kv heads leave 512 // 64 = 8 chunks; 40000 keys in 8 chunks would be 5000 keys each, so the count
    # is raised to ceil(40000 / CHUNK_MAX = 1024) = 40 chunks of 1024 (40 * 1024 >= 40000)
    caps = Caps.synthetic(has_f16=True, max_workgroup_storage=32768)
    p = plan(PlanFacts("decode", "f16", 1, 64, 128, 40000, num_kv_heads=64), caps)
    assert (p.variant, p.max_chunks, p.workgroups) == ("decode_splitk_g1_f16", 40, (40, 64, 1))


def test_splitk_companions_must_agree(tmp_path):
    # a combine that derives the chunk count with another CHUNK_STEP than its main kernel merges the wrong chunks
    import shutil
    from wgraph.errors import RegistryError
    from wgraph.ops.attention_planner import check_splitk_companions
    from wgraph.kernels.registry import SHADER_DIR, load_registry

    shutil.copytree(SHADER_DIR, tmp_path / "s")
    toml = tmp_path / "s" / "registry" / "attention.toml"
    for other in toml.parent.glob("*.toml"):   # the single-sequence attention kernels only: a quicker load
        if other.name not in (toml.name, "matrices.toml"):
            other.unlink()
    text = toml.read_text()
    head, tail = text.split("[variants.decode_splitk_combine]", 1)
    toml.write_text(head + "[variants.decode_splitk_combine]" + tail.replace('CHUNK_STEP = "64"', 'CHUNK_STEP = "32"', 1))
    reg = load_registry(toml.parent, tmp_path / "s")
    good = registry()
    check_splitk_companions(good["decode_splitk_g4_f16"], good)
    with pytest.raises(RegistryError, match="decode_splitk_g4_f16 has CHUNK_STEP 64 but its combine "
                                            "decode_splitk_combine_f16 has 32"):
        check_splitk_companions(reg["decode_splitk_g4_f16"], reg)


def test_forced_variant_is_validated_not_replaced():
    caps = Caps.synthetic(has_f16=True, max_workgroup_storage=32768)
    facts = PlanFacts("prefill", "f32", 33, 8, 128, 100)
    with pytest.raises(wg.LimitError, match=r"head_dim <= 64; got 128"):
        plan(facts, caps, "prefill_tiled_large_f32")
    with pytest.raises(wg.PlanError, match="decode kernel; the call is prefill"):
        plan(facts, caps, "decode_streaming_f32")
    with pytest.raises(wg.PlanError, match="takes dtype f16"):
        plan(facts, caps, "prefill_streaming_f16")
    with pytest.raises(wg.UnsupportedError, match=r"needs features \['subgroup'\]"):
        plan(PlanFacts("decode", "f32", 1, 8, 64, 100), caps, "decode_subgroup_f32")
    with pytest.raises(wg.LimitError, match="20480 bytes of workgroup memory; the device has 16384"):
        plan(PlanFacts("prefill", "f32", 33, 8, 64, 100), Caps.synthetic(), "prefill_tiled_large_f32")
    with pytest.raises(wg.PlanError, match="unknown attention variant 'nope'"):
        plan(facts, caps, "nope")
    assert plan(facts, caps, "prefill_streaming_f32").variant == "prefill_streaming_f32"


def test_kernel_path(tmp_path):
    path = wg.kernel_path({"prefill": {"default": "prefill_streaming_f32", "3": "prefill_tiled_small_f32"},
                           "decode": "decode_streaming_f32"})
    q, k = wg.TensorSpec((9, 4, 64), "f32"), wg.TensorSpec((40, 2, 64), "f32")
    caps = Caps.synthetic(max_workgroup_storage=32768)
    assert wg.ops.attention_plan(q, k, k, causal=True, caps=caps, variant=path).variant == "prefill_streaming_f32"
    plan = wg.ops.attention_plan(q, k, k, causal=True, caps=caps, variant=path, layer=3)
    assert plan.variant == "prefill_tiled_small_f32"
    with path:
        q1 = wg.TensorSpec((1, 4, 64), "f32")
        assert wg.ops.attention_plan(q1, k, k, causal=True, caps=caps).variant == "decode_streaming_f32"
    f = tmp_path / "path.toml"
    f.write_text('decode = "decode_chunked_f32"\n')
    assert wg.kernel_path(f).variant("decode") == "decode_chunked_f32"
    with pytest.raises(wg.PlanError, match="not a prefill attention variant"):
        wg.kernel_path({"prefill": "decode_streaming_f32"})
    # a file's entry that is no name (a list or table of TOML or JSON) raised TypeError (unhashable) from the registry
    f.write_text('decode = ["decode_chunked_f32"]\n')
    with pytest.raises(wg.PlanError, match=r"\['decode_chunked_f32'\] is not a decode attention variant"):
        wg.kernel_path(f)
    with pytest.raises(wg.PlanError, match=r"\{\} is not a prefill attention variant"):
        wg.kernel_path({"prefill": {"3": {}}})


def _t(dev, shape, dtype="f32"):
    return dev.tensor(np.zeros(shape, np.float16 if dtype == "f16" else np.float32), dtype)


BAD = [
    (dict(q=(4, 2, 64), k=(8, 2, 32)), wg.ShapeError, "q head_dim 64 != k/v head_dim 32"),
    (dict(q=(4, 3, 32), k=(8, 2, 32)), wg.ShapeError, "q heads 3 is not a multiple of kv heads 2"),
    (dict(q=(4, 2, 520), k=(8, 2, 520)), wg.LimitError, "head_dim 520 is above every attention kernel's limit .largest: 512"),
    (dict(q=(4, 2, 32), k=(8, 2, 32), kv_len=9), wg.LimitError, "kv_len 9 is above the k/v buffer's 8 rows"),
    (dict(q=(4, 2, 32), k=(16, 2, 32), kv_layout="paged", pages=2, page_size=4, kv_len=9), wg.LimitError,
     "page table too short: kv_len 9 needs 3 pages of 4, the table has 2"),
    (dict(q=(4, 2, 32), k=(8, 2, 32), kv_layout="ring", kv_len=20), wg.LimitError, "ring of 8 rows"),
    (dict(q=(4, 2, 128), k=(8, 2, 128), variant="prefill_tiled_large_f32"), wg.LimitError,
     "forced attention variant prefill_tiled_large_f32 does not fit: it takes head_dim <= 64; got 128"),
    (dict(q=(1, 2, 32), k=(8, 2, 32), variant="prefill_streaming_f32"), wg.PlanError, "is a prefill kernel"),
    (dict(q=(4, 2, 32), k=(8, 2, 32), kdtype="f16", qdtype="f16", vdtype="f32"), wg.DtypeError, "k is f16 but v is f32"),
]


@pytest.mark.parametrize("case,err,msg", BAD)
def test_bad_input_fails_before_gpu_work(dev, case, err, msg):
    skip_unless_f16(dev, *(case.get(f"{t}dtype", "f32") for t in "qkv"))
    case = dict(case)
    q = _t(dev, case.pop("q"), case.pop("qdtype", "f32"))
    kshape = case.pop("k")
    k = _t(dev, kshape, case.pop("kdtype", "f32"))
    v = _t(dev, kshape, case.pop("vdtype", k.dtype))
    pages = case.pop("pages", None)
    if pages is not None:
        case["page_table"] = dev.tensor(np.arange(pages, dtype=np.uint32))
    before = dev.stats.snapshot()
    with pytest.raises(err, match=msg):
        wg.ops.attention(q, k, v, causal=True, **case)
    delta = dev.stats.since(before)
    assert (delta.submits, delta.dispatches) == (0, 0)


def test_fused_decode_on_gpus_with_subgroups():
    """The fused split-K decode: planned on a GPU with subgroups when head_dim / dims_per_lane is a power of
    two (its lanes per key row), else the split-K kernel, with the numbers in the reason."""
    gpu = Caps.synthetic(has_subgroups=True, has_f16=True, max_workgroup_storage=32768)
    p = plan(PlanFacts("decode", "f16", 1, 32, 128, 32768, num_kv_heads=8), gpu)
    assert (p.variant, p.tier) == ("decode_fused_g4_f16", "fused") and "subgroup shuffles" in p.reason
    assert p.dispatches[1][0] == "decode_splitk_combine_f16"
    span = registry()["decode_fused_g4_f16"].facts.get("min_kv_span", 0)   # a speed rule of the registry
    if span > 64:   # short kv: split-K for GQA
        p = plan(PlanFacts("decode", "f16", 1, 32, 128, span - 64, num_kv_heads=8), gpu)
        assert p.variant == "decode_splitk_g4_f16"
        assert f"kv span {span - 64} < {span}" in dict(p.rejected)["decode_fused_g4_f16"]
    assert plan(PlanFacts("decode", "f16", 1, 16, 128, 1024), gpu).variant == "decode_fused_g1_f16"
    p = plan(PlanFacts("decode", "f16", 1, 16, 80, 4096), gpu)   # 80 / 16 = 5 (or / 8 = 10) lanes: not a power of 2
    lanes = 80 // registry()["decode_fused_g1_f16"].limits["dims_per_lane"]
    assert p.variant == "decode_splitk_g1_f16"
    assert f"= {lanes} lanes: needs a power of two" in dict(p.rejected)["decode_fused_g1_f16"]
    no_sg = Caps.synthetic(has_subgroups=False, has_f16=True, max_workgroup_storage=32768)
    assert plan(PlanFacts("decode", "f32", 1, 16, 64, 4096), no_sg).variant == "decode_splitk_g1_f32"
    cpu = Caps.synthetic(has_subgroups=True, has_f16=True, max_workgroup_storage=32768, is_cpu=True)
    p = plan(PlanFacts("decode", "f16", 1, 32, 128, 32768, num_kv_heads=8), cpu)
    assert p.variant == "decode_splitk_g4_f16" and "GPU-tuned" in dict(p.rejected)["decode_fused_g4_f16"]


def test_one_pass_decode_where_the_keys_are_few():
    """decode_single (one dispatch, one workgroup per q head) is planned on a GPU with subgroups up to its
    registry max_kv_span keys of storage (the capacity, whatever an int kv_len), for every GQA group; past it the
    fused split-K pair, saying why; never on a CPU device (GPU-tuned) unless forced."""
    gpu = Caps.synthetic(has_subgroups=True, has_f16=True, max_workgroup_storage=32768)
    most = registry()["decode_single_f16"].facts["max_kv_span"]
    for hq, hkv, d in ((32, 8, 64), (32, 8, 128), (16, 16, 64), (64, 8, 128)):
        p = plan(PlanFacts("decode", "f16", 1, hq, d, most, num_kv_heads=hkv), gpu)
        assert (p.variant, p.tier, p.max_chunks) == ("decode_single_f16", "single", 0)
        assert p.workgroups == (1, hkv, hq // hkv) and p.dispatches == (("decode_single_f16", (1, hkv, hq // hkv)),)
        p = plan(PlanFacts("decode", "f16", 1, hq, d, most + 1, num_kv_heads=hkv), gpu)
        assert p.tier == "fused" and len(p.dispatches) == 2
        assert f"kv capacity {most + 1} > {most}" in dict(p.rejected)["decode_single_f16"]
        # the rule reads the storage's keys, not an int kv_len's span: a Program moving kv_len keeps its kernels
        p = plan(PlanFacts("decode", "f16", 1, hq, d, 100, num_kv_heads=hkv, kv_capacity=most + 1), gpu)
        assert p.tier == "fused" and f"kv capacity {most + 1} > {most}" in dict(p.rejected)["decode_single_f16"]
        p = plan(PlanFacts("decode", "f16", 1, hq, d, 100, num_kv_heads=hkv, kv_capacity=most), gpu)
        assert p.tier == "single"
    p = plan(PlanFacts("decode", "f32", 1, 16, 80, 100), gpu)   # 80 / 8 = 10 lanes: not a power of two
    assert p.variant == "decode_splitk_g1_f32" and "= 10 lanes" in dict(p.rejected)["decode_single_f32"]
    small = Caps.synthetic(has_subgroups=True, has_f16=True, max_workgroup_storage=8192)   # f16: 16384 bytes
    p = plan(PlanFacts("decode", "f16", 1, 32, 64, 100, num_kv_heads=8), small)
    assert p.tier == "fused" and "16384 bytes of workgroup memory" in dict(p.rejected)["decode_single_f16"]
    cpu = Caps.synthetic(has_subgroups=True, has_f16=True, max_workgroup_storage=32768, is_cpu=True)
    p = plan(PlanFacts("decode", "f16", 1, 32, 64, 100, num_kv_heads=8), cpu)
    assert p.tier != "single" and "GPU-tuned" in dict(p.rejected)["decode_single_f16"]
    assert plan(PlanFacts("decode", "f16", 1, 32, 64, 100, num_kv_heads=8), cpu, "decode_single_f16").tier == "single"


def test_attention_facts_carry_the_storage_capacity():
    """wg.ops.attention's plan facts: an int kv_len sets the span (the keys the query sees) and leaves the capacity
    at the storage's keys, which the one-pass rule reads; a GPU kv_len makes both the capacity."""
    from wgraph.ops.attention import AttentionParams, plan_facts
    from wgraph.tensor import TensorSpec

    specs = (TensorSpec((1, 32, 64), "f16"), TensorSpec((4096, 8, 64), "f16"), TensorSpec((4096, 8, 64), "f16"),
             None, None)
    f = plan_facts(AttentionParams(causal=True, kv_len=100), specs)
    assert (f.kv_span, f.kv_capacity) == (100, 4096)
    gpu = Caps.synthetic(has_subgroups=True, has_f16=True, max_workgroup_storage=32768)
    assert plan(f, gpu).tier == "fused"
    small = tuple(TensorSpec((300, 8, 64), "f16") if i in (1, 2) else x for i, x in enumerate(specs))
    f = plan_facts(AttentionParams(causal=True, kv_len=100), small)
    assert (f.kv_span, f.kv_capacity) == (100, 300) and plan(f, gpu).tier == "single"
    gpu_len = tuple(TensorSpec((1,), "u32") if i == 3 else x for i, x in enumerate(small))
    f = plan_facts(AttentionParams(causal=True), gpu_len)
    assert (f.kv_span, f.kv_capacity) == (300, 300)


def test_gemm_prefill_planned_where_the_h200_confirmed_it():
    """The GEMM-shaped prefill as the H200 A/B confirmed it (benchmarks/results/h200-prefill-ab.json): f32 at
    D <= 128, f16 at D 65..128 (single sequence; the varlen twin f16 only), and (an H100 A/B since) f16 at D <= 64 up
    to 32768 query rows x heads; the f16kv entries stay experimental: passed over, saying why, and still run when
    forced."""
    gpu = Caps.synthetic(has_subgroups=True, has_f16=True, max_workgroup_storage=32768)
    facts = PlanFacts("prefill", "f32", 4096, 16, 128, 4096)
    p = plan(facts, gpu)
    assert (p.variant, p.tier, p.workgroups) == ("prefill_gemm_d128_f32", "gemm", (16, 64, 1))
    p = plan(PlanFacts("prefill", "f16kv", 100, 8, 128, 100), gpu)
    assert p.variant == "prefill_flash_d128_f16kv"
    assert dict(p.rejected)["prefill_gemm_d128_f16kv"] == "experimental: not planned until an H200 A/B confirms it"
    assert plan(PlanFacts("prefill", "f16kv", 100, 8, 128, 100), gpu, "prefill_gemm_d128_f16kv").workgroups == (8, 2, 1)
    assert plan(PlanFacts("prefill", "f16", 100, 8, 64, 100), gpu).variant == "prefill_gemm_d64_f16"
    assert plan(PlanFacts("prefill", "f16", 8192, 8, 64, 8192), gpu).variant == "prefill_flash_d64_f16"
    assert plan(PlanFacts("prefill", "f32", 100, 8, 64, 100), gpu).variant == "prefill_gemm_d64_f32"
    assert plan(PlanFacts("prefill", "f16", 100, 8, 256, 100), gpu).variant == "prefill_flash_d256_f16"
    # a CPU device (GPU-tuned) and a GPU without subgroups keep the tiled kernels
    cpu = Caps.synthetic(has_subgroups=True, has_f16=True, max_workgroup_storage=32768, is_cpu=True)
    assert plan(PlanFacts("prefill", "f32", 100, 8, 64, 100), cpu).variant == "prefill_tiled_large_f32"
    plain = Caps.synthetic(has_f16=True, max_workgroup_storage=32768)
    assert plan(PlanFacts("prefill", "f32", 100, 8, 128, 100), plain).variant == "prefill_tiled_small_f32"
    # 20736 bytes of workgroup memory: a device with 16 KB keeps the flash kernel
    small = Caps.synthetic(has_subgroups=True, has_f16=True, max_workgroup_storage=16384)
    p = plan(facts, small)
    assert p.variant == "prefill_flash_d128_f32" and "20736 bytes" in dict(p.rejected)["prefill_gemm_d128_f32"]
    # batches: varlen prefill takes the batched twin in f16 (128 threads); f32 stays on the flash twin
    varlen = PlanFacts("prefill", "f16", 512, 32, 128, 1024, num_kv_heads=8, family="attention_batched", batch=8)
    assert plan(varlen, gpu).variant == "batched_gemm_d128_f16"
    f32 = PlanFacts("prefill", "f32", 512, 32, 128, 1024, num_kv_heads=8, family="attention_batched", batch=8)
    assert "experimental" in dict(plan(f32, gpu).rejected)["batched_gemm_d128_f32"]


def _add_refused_before_gpu_work(dev, monkeypatch, match: str, **limits) -> None:
    """wg.ops.add on the device with `limits` of its caps changed: a LimitError matching `match`, no dispatch."""
    import attrs

    monkeypatch.setattr(dev, "caps", attrs.evolve(dev.caps, **limits))
    a = dev.tensor(np.ones(4, np.float32))
    before = dev.stats.snapshot()
    with pytest.raises(wg.LimitError, match=match):
        wg.ops.add(a, a)
    assert dev.stats.since(before).dispatches == 0


def test_kernels_past_the_devices_storage_buffers_are_refused_by_name(dev, monkeypatch):
    """A device that binds fewer storage buffers per shader stage than a kernel declares (WebGPU's default is 8;
    the batched attention kernels bind 9, the elementwise add 3 or more) failed in wgpu's validation at pipeline
    creation; the planner passes such kernels over with the reason, and a dispatch of one is a LimitError naming
    the kernel and the limit, before any GPU work."""
    facts = PlanFacts("prefill", "f16", 33, 8, 128, 100, family="attention_batched", batch=2)
    with pytest.raises(wg.LimitError, match=r"batched_tiled_small_f16 binds 9 storage buffers; the device allows 8"):
        plan(facts, Caps.synthetic(has_f16=True, max_storage_buffers_per_stage=8))
    assert plan(facts, Caps.synthetic(has_f16=True, max_storage_buffers_per_stage=9)).variant
    _add_refused_before_gpu_work(dev, monkeypatch, r"kernel add_f32 binds \d+ storage buffers; the device allows 2 per "
                                 r"shader stage", max_storage_buffers_per_stage=2)


def test_a_dispatch_past_the_devices_threads_per_workgroup_is_refused_by_name(dev, monkeypatch):
    """The dispatch check read features, workgroup memory and storage buffers but not the threads per workgroup
    (the planners did): a kernel of 64 threads on a device allowing 32 reached wgpu's validation at pipeline
    creation. core.device_refusal is the one check: a LimitError naming the kernel and both numbers."""
    from wgraph.kernels.registry import registry

    threads = registry()["add_f32"].threads
    _add_refused_before_gpu_work(dev, monkeypatch, rf"kernel add_f32 needs {threads} threads per workgroup; the "
                                 rf"device allows {threads // 2}$", max_invocations_per_workgroup=threads // 2)
