"""Loop iterations one invocation of an attention kernel runs, from the kernel's loop nest and its consts,
counted against a CPU adapter's loop cap by the rule of ops/cpu_limits.py (each figure is an upper bound).
One function per kernel file; the planner rejects on a CPU device every kernel (with its companion passes) whose
bound passes the limit, and a kernel file without a function here. Bounds read only the kernel's consts and the
plan facts, never the planner (which imports this module): where a plan's chunk count matters, they bound it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wgraph.errors import LimitError
from wgraph.kernels.registry import Kernel, registry
from wgraph.ops.attention_chunks import splitk_chunks
from wgraph.ops.core import ceil_div
from wgraph.ops.cpu_limits import CPU_DEVICE, CPU_LOOP_LIMIT
from wgraph.ops.cpu_limits import halvings as _halvings
from wgraph.ops.cpu_limits import loop as _loop

if TYPE_CHECKING:
    from wgraph.ops.attention_planner import PlanFacts

__all__ = ["BOUNDS", "CPU_LOOP_LIMIT", "check_decode_loop", "cpu_misfit", "decode_loop_iterations",
           "loop_iterations"]


def kconst(k: Kernel, name: str) -> int:
    """A kernel's integer const (the one way this module reads them)."""
    return k.const(name)


def _stream_core(k: Kernel, head_dim: int, keys: int) -> int:
    """attention_stream_core.wgsl's attend_range over `keys` keys: per chunk of WG keys the score's head-dim loop,
    two tree reductions, and the V loop (DIMS_PER_THREAD x the chunk's keys)."""
    wg, dpt = kconst(k, "WG"), kconst(k, "DIMS_PER_THREAD")
    chunk = _loop(head_dim) + 2 * _loop(_halvings(wg)) + _loop(dpt, _loop(wg))
    return _loop(ceil_div(keys, wg), chunk)


def _tiled(k: Kernel, f: PlanFacts, caps) -> int:
    """attention_prefill_tiled.wgsl (the tile load and update included from attention_tiled_load.wgsl and
    attention_tiled_update.wgsl): a block of BLOCK_M queries walks the union of their key ranges (at most
    kv_span + BLOCK_M - 1 keys) in tiles of TILE_N: load, scores (a head-dim dot each), tile max, rescale, P.V."""
    wg, bm, tn, dpt = (kconst(k, n) for n in ("WG", "BLOCK_M", "TILE_N", "DIMS_PER_THREAD"))
    d = f.head_dim
    tile = (_loop(ceil_div(tn * d, wg)) + _loop(ceil_div(bm * tn, wg), _loop(d)) + _loop(tn) + _loop(dpt)
            + _loop(tn, _loop(dpt)))
    return _loop(ceil_div(f.kv_span + bm - 1, tn), tile) + _loop(dpt)


def _flash(k: Kernel, f: PlanFacts, caps) -> int:
    """attention_prefill_flash.wgsl (its tile loop included from attention_flash_tiles.wgsl): tiles of TILE_N keys
    over the block's union of ranges; per tile the tile load and, per (key, row), the butterfly over TPQ lanes
    (every other loop is unrolled by //!repeat)."""
    wg, bm, tn, tpq, r, tile4 = (kconst(k, n) for n in ("WG", "BLOCK_M", "TILE_N", "TPQ", "R", "TILE4"))
    tile = _loop(ceil_div(tile4, wg)) + tn * r * _loop(_halvings(tpq))
    return _loop(ceil_div(f.kv_span + bm - 1, tn), tile)


def _gemm(k: Kernel, f: PlanFacts, caps) -> int:
    """attention_prefill_gemm.wgsl (its body in attention_gemm_body.wgsl): tiles of BLOCK_N keys over the block's
    union of ranges; per tile the head-dim chunks, two butterflies over LPR lanes and the V chunks; then the final
    butterfly (staging and every other loop are unrolled by //!repeat)."""
    bm, bn, dc4, vc, row4, lpr = (kconst(k, n) for n in ("BLOCK_M", "BLOCK_N", "DC4", "VC", "ROW4", "LPR"))
    tile = _loop(row4 // dc4) + 2 * _loop(_halvings(lpr)) + _loop(bn // vc)
    return _loop(ceil_div(f.kv_span + bm - 1, bn), tile) + _loop(_halvings(lpr))


def _stream(k: Kernel, f: PlanFacts, caps) -> int:
    """attention_stream.wgsl: one workgroup per (query, head) over all kv_span keys."""
    return _stream_core(k, f.head_dim, f.kv_span) + _loop(kconst(k, "DIMS_PER_THREAD"))


def _chunked(k: Kernel, f: PlanFacts, caps) -> int:
    """attention_decode_chunked.wgsl: attend_range over one chunk of chunk_size keys."""
    return _stream_core(k, f.head_dim, int(k.facts["chunk_size"])) + _loop(kconst(k, "DIMS_PER_THREAD"))


def _chunked_combine(k: Kernel, f: PlanFacts, caps, chunk_size: int) -> int:
    """attention_decode_combine.wgsl: two passes over the chunks, then per head dim of a thread one more."""
    chunks = max(1, ceil_div(f.kv_span, chunk_size))
    return 2 * _loop(chunks) + _loop(ceil_div(f.head_dim, k.workgroup_size[0]), _loop(chunks))


def _subgroup(k: Kernel, f: PlanFacts, caps) -> int:
    """attention_decode_subgroup.wgsl: each subgroup walks every nsg-th key with two DIMS_PER_LANE loops per key;
    nsg is at least WG / the device's largest subgroup (taken as 1 when the device does not say)."""
    wg, dpl, most = kconst(k, "WG"), kconst(k, "DIMS_PER_LANE"), kconst(k, "MAX_SUBGROUPS")
    nsg = max(1, wg // caps.subgroup_max_size) if caps.subgroup_max_size else 1
    keys = _loop(ceil_div(f.kv_span, nsg), 2 * _loop(dpl))
    return (_loop(ceil_div(kconst(k, "MAX_D"), wg)) + _loop(dpl) + keys + 2 * _loop(most)
            + _loop(most, _loop(dpl)) + _loop(ceil_div(f.head_dim, wg)))


def _splitk(k: Kernel, f: PlanFacts, caps) -> int:
    """attention_decode_splitk.wgsl (its loops included from attention_splitk_steps.wgsl and
    attention_splitk_partials.wgsl): one chunk of at most CHUNK_MAX keys: scores in steps of KS * U keys (a pairs
    loop of LPR partials each), the softmax's strided passes, P.V steps, and the slots' sums per head."""
    wg, u, g, cap = (kconst(k, n) for n in ("WG", "U", "G_TILE", "CHUNK_MAX"))
    lpr = max(1, f.head_dim // kconst(k, "ELEMS"))
    ks = max(1, wg // lpr)
    steps = ceil_div(cap, ks * u)
    scores = _loop(steps, _loop(ceil_div(ks * u * g, wg), _loop(lpr)))
    softmax = 2 * _loop(ceil_div(cap, max(1, wg // g))) + 2 * _loop(ceil_div(wg, g))
    sums = g * _loop(ceil_div(f.head_dim, wg), _loop(ks))
    return scores + softmax + _loop(steps) + sums


def _fused_walk(k: Kernel, head_dim: int, keys: int) -> int:
    """The fused kernels' walk of one chunk of `keys` keys (attention_fused_steps.wgsl, attention_fused_merge.wgsl):
    steps of KS * U keys, per key of a step a shuffle butterfly over the LPR lanes of a row and an LPR loop; then
    two KS passes and per head dim of a thread a KS sum."""
    wg, u = kconst(k, "WG"), kconst(k, "U")
    lpr = max(1, head_dim // int(k.limits["dims_per_lane"]))
    ks = max(1, wg // lpr)
    per_step = u * (_loop(_halvings(lpr)) + _loop(lpr))
    return _loop(ceil_div(keys, ks * u), per_step) + 2 * _loop(ks) + _loop(ceil_div(head_dim, wg), _loop(ks))


def _fused(k: Kernel, f: PlanFacts, caps) -> int:
    """attention_decode_fused.wgsl: the fused walk of one chunk (at most kv_span keys rounded up to CHUNK_STEP, at
    most CHUNK_MAX)."""
    step = kconst(k, "CHUNK_STEP")
    return _fused_walk(k, f.head_dim, min(kconst(k, "CHUNK_MAX"), max(step, ceil_div(f.kv_span, step) * step)))


def _single(k: Kernel, f: PlanFacts, caps) -> int:
    """attention_decode_single.wgsl: the fused walk over all kv_span keys as one chunk, or the no-key path's
    head-dim loop and head loop (counted too)."""
    g = kconst(k, "G_TILE")
    return _fused_walk(k, f.head_dim, f.kv_span) + _loop(ceil_div(g * f.head_dim, kconst(k, "WG"))) + _loop(g)


def _splitk_combine(k: Kernel, f: PlanFacts, caps, chunks: int) -> int:
    """attention_decode_splitk_combine.wgsl (its loops included from attention_combine_consts.wgsl and
    attention_combine_merge.wgsl): a strided pass and a grouped pass over the chunks, one reduction, and the
    groups' sum."""
    wg, unroll = kconst(k, "WG"), kconst(k, "UNROLL")
    groups = max(1, wg // max(1, f.head_dim // 4))
    return (_loop(ceil_div(chunks, wg)) + _loop(_halvings(wg)) + _loop(ceil_div(chunks, groups * unroll))
            + _loop(groups))


# kernel file -> iterations of one invocation (main kernels; companions are counted through their main kernel)
BOUNDS = {
    "attention_prefill_tiled.wgsl": _tiled,
    "attention_prefill_flash.wgsl": _flash,
    "attention_prefill_gemm.wgsl": _gemm,
    "attention_stream.wgsl": _stream,
    "attention_decode_chunked.wgsl": _chunked,
    "attention_decode_subgroup.wgsl": _subgroup,
    "attention_decode_splitk.wgsl": _splitk,
    "attention_decode_fused.wgsl": _fused,
    "attention_decode_single.wgsl": _single,
    # the batched kernels (wgraph/ops/attention_batched.py) share these kernels' loop nests (the same included
    # bodies, docs/kernels.md) and consts; kv_span is the longest sequence's keys, and a split-K kernel's chunks
    # are the batch's (splitk_chunks reads the batch size from the facts)
    "attention_batched_tiled.wgsl": _tiled,
    "attention_batched_flash.wgsl": _flash,
    "attention_batched_gemm.wgsl": _gemm,
    "attention_batched_decode.wgsl": _splitk,
    "attention_batched_fused.wgsl": _fused,
    "attention_batched_single.wgsl": _single,
}


def decode_loop_iterations(k: Kernel, head_dim: int, keys: int) -> int:
    """tiered_loop.wgsl (the tiered and bdpa decode kernels, which have no other kernel to fall back on): the q
    load, then per tile of WG keys a key's dot (counted as 3 head-dim loops: a tile may mix hot and cold keys, and
    a quantized key unpacks words), the tile max, the rescale and P.V (ACC_N per key), and the output loop."""
    wg, acc = kconst(k, "WG"), kconst(k, "ACC_N")
    tile = 3 * _loop(head_dim) + _loop(wg) + _loop(acc) + _loop(wg, _loop(acc))
    return _loop(ceil_div(head_dim, wg)) + _loop(ceil_div(keys, wg), tile) + _loop(acc)


def check_decode_loop(k: Kernel, head_dim: int, keys: int, caps, op: str) -> None:
    """LimitError on a CPU device when a tiered / bdpa decode over `keys` keys passes lavapipe's loop cap."""
    if caps.is_cpu:
        n = decode_loop_iterations(k, head_dim, keys)
        if n > CPU_LOOP_LIMIT:
            raise LimitError(f"{op}: {keys} keys at head_dim {head_dim} would run up to {n} loop iterations in one "
                             f"invocation of {k.name}; a CPU device (lavapipe) stops at {CPU_LOOP_LIMIT}, silently")


def loop_iterations(k: Kernel, f: PlanFacts, caps) -> int | None:
    """The most loop iterations one invocation of `k`'s plan runs (its combine pass included),
    or None when a kernel file of the plan has no bound here."""
    fn = BOUNDS.get(k.file)
    if fn is None:
        return None
    worst = fn(k, f, caps)
    reg = registry()
    if "combine" in k.facts:
        combine = reg[k.facts["combine"]]
        if k.facts.get("grid") in ("splitk", "seq_splitk"):
            worst = max(worst, _splitk_combine(combine, f, caps, splitk_chunks(k, f)[1]))
        else:
            worst = max(worst, _chunked_combine(combine, f, caps, int(k.facts["chunk_size"])))
    return worst


def cpu_misfit(k: Kernel, f: PlanFacts, caps) -> str | None:
    """Why `k` must not run this call on a CPU device (lavapipe's loop cap), or None."""
    n = loop_iterations(k, f, caps)
    if n is None:
        return (f"has no loop bound in wgraph/ops/attention_loops.py, so it is not planned on {CPU_DEVICE} "
                f"(lavapipe stops an invocation's loops after {CPU_LOOP_LIMIT} iterations)")
    if n > CPU_LOOP_LIMIT:
        return (f"would run up to {n} loop iterations in one invocation at kv span {f.kv_span} (head_dim "
                f"{f.head_dim}); {CPU_DEVICE} (lavapipe) stops at {CPU_LOOP_LIMIT}, silently")
    return None
