"""How a split-K decode splits its keys into chunks: the one chunking function of every split-K kernel, single
or batched, read by the planner (grid, partial buffers) and by the lavapipe loop bounds (the combine's loop)."""

from __future__ import annotations

from wgraph.kernels.registry import Kernel
from wgraph.ops.core import ceil_div


def head_blocks(k: Kernel, facts) -> int:
    """Blocks of the kernel's G_TILE q heads per kv head: a decode kernel's workgroups along its head axis."""
    return ceil_div(facts.q_per_kv, k.const("G_TILE"))


def splitk_chunks(k: Kernel, facts) -> tuple[int, int, int]:
    """(chunks, most chunks, head blocks) of a split-K decode over kv_span visible keys (`facts`: the planner's
    PlanFacts); mirrors attention_splitk_split.wgsl, which derives the same count on the GPU from kv_len. `most`
    (the uniform num_chunks, KernelPlan.max_chunks, which sizes the partial buffers) aims at SPLIT_TARGET
    workgroups over the whole batch (B sequences x kv heads x head blocks x chunks: fewer, longer chunks as the
    batch fills the GPU) and is raised where needed so that no chunk holds more than CHUNK_MAX keys."""
    step, cap, target = (k.const(n) for n in ("CHUNK_STEP", "CHUNK_MAX", "SPLIT_TARGET"))
    hkv = facts.num_kv_heads or facts.num_heads
    blocks = head_blocks(k, facts)
    per_seq = max(1, target // (hkv * blocks * max(1, facts.batch)))
    most = max(1, min(per_seq, ceil_div(facts.kv_span, step)), ceil_div(facts.kv_span, cap))
    chunk = max(step, ceil_div(ceil_div(facts.kv_span, most), step) * step)
    return ceil_div(facts.kv_span, chunk), most, blocks
