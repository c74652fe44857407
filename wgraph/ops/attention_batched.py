"""Batched attention over many sequences in one plan: `attention_varlen` (FlashAttention 2's
`flash_attn_varlen_func`: packed q/k/v and cu_seqlens) and `attention_kvcache` (`flash_attn_with_kvcache`:
per-sequence or paged caches, cache_seqlens, new rows written before attending), plus `seqlens_advance`, which
moves a GPU cache_seqlens on so a recorded decode step replays. Semantics: docs/attention.md.

A call is one dispatch (flash or tiled: any queries per sequence) or two (split-K decode: one query per sequence,
then the combine), plus one to write new cache rows; none grows with the batch size, and no host work per step
depends on B when the lengths live on the GPU."""

from __future__ import annotations

import contextlib
import math
from typing import Any

import attrs
import numpy as np

from wgraph import args
from wgraph.api_types import Ids, TensorT
from wgraph.errors import AliasingError, DtypeError, LimitError, PlanError, ShapeError, WgraphError
from wgraph.ops.attention import KV_LEN_MAX, call_dtype, require_causal, window_of
from wgraph.ops.attention_planner import KernelPlan, PlanFacts, max_head_dim, plan
from wgraph.ops.core import OpDef, apply, ceil_div, register, tensor_arg
from wgraph.kernels.registry import kernel, registry, select_variant
from wgraph.tensor import Tensor, TensorSpec, require


@attrs.frozen
class BatchedParams:
    """Options of one batched call. varlen: max_q/max_k are max_seqlen_q/k. kvcache: max_q is the queries per
    sequence, max_k the capacity of one sequence, seqlen_add the rows this call appended before attending."""

    mode: str
    causal: bool
    window: tuple[int, int]
    softcap: float
    return_lse: bool
    max_q: int
    max_k: int
    scale: float | None = None
    page_size: int = 0
    seqlen_add: int = 0
    variant: str | None = None   # forced kernel (an attention_batched variant), else planned


def _spec3(name: str, s: TensorSpec | None, dims: int) -> tuple:
    if s is None or len(s.shape) != dims:
        raise ShapeError(f"{name} must have {dims} dims, got {None if s is None else s.shape}")
    return s.shape


def _check_u32(name: str, s: TensorSpec | None, shape: tuple):
    got = None if s is None else f"{s.dtype} {s.shape}"
    require(s, "u32", s is not None and s.shape == shape, f"{name} must be u32 {shape}, got {got}")


def _heads(op: str, Hq: int, D: int, Hkv: int, Dk: int, q_dtype: str, k: TensorSpec, v: TensorSpec) -> str:
    if v.shape != k.shape:
        raise ShapeError(f"{op}: k {k.dtype} {k.shape} and v {v.dtype} {v.shape} differ")
    if v.dtype != k.dtype:   # a dtype, not a shape, as attention's kv-dtypes-differ (docs/errors.md)
        raise DtypeError(f"{op}: k is {k.dtype} but v is {v.dtype}")
    if Dk != D or min(Hq, Hkv, D) < 1 or Hq % Hkv:
        raise ShapeError(f"{op}: q has {Hq} heads of dim {D}, k/v {Hkv} heads of dim {Dk}: need equal head dims "
                         f"and Hq a multiple of Hkv")
    limit = max_head_dim("attention_batched")
    if D > limit:
        raise LimitError(f"{op}: head_dim {D} is above the batched kernels' limit of {limit}")
    return call_dtype(q_dtype, k.dtype, op)


def _geometry(p: BatchedParams, specs) -> dict:
    """Batch size, rows and layout of a call, validated (no GPU work)."""
    q, k, v, cu_q, kv_lens, table = specs
    op = f"attention_{args.choice('attention_batched', 'mode', p.mode, ('varlen', 'kvcache'))}"
    _check_fields(op, p)
    if p.mode == "varlen":
        total_q, Hq, D = _spec3(f"{op}: q", q, 3)
        total_k, Hkv, Dk = _spec3(f"{op}: k", k, 3)
        if cu_q is None or len(cu_q.shape) != 1 or cu_q.shape[0] < 1:
            raise ShapeError(f"{op}: cu_seqlens_q must be u32 [B + 1], got {cu_q}")
        B = cu_q.shape[0] - 1
        _check_u32(f"{op}: cu_seqlens_q", cu_q, (B + 1,))
        _check_u32(f"{op}: cu_seqlens_k", kv_lens, (B + 1,))
        # no sequence (offsets [0]) holds no row, known from the shape alone: a GPU [0] ran no dispatch, so it
        # neither wrote q's rows (out kept what its buffer held) nor set the error flag a wrong last offset sets
        for name, rows in (("q", total_q), ("k", total_k)):
            if B == 0 and rows:
                raise ShapeError(f"{op}: cu_seqlens of shape (1,) hold no sequence (B = 0), but {name} has {rows} "
                                 f"rows; each row belongs to a sequence")
        geo = dict(B=B, q_rows=total_q, kv_rows=total_k, layout=0, pages=0, max_pages=0)
    else:
        B, Sq, Hq, D = _spec3(f"{op}: q", q, 4)
        _check_u32(f"{op}: cache_seqlens", kv_lens, (B,))
        if table is None:
            Bk, cap, Hkv, Dk = _spec3(f"{op}: k_cache (contiguous: [B, capacity, Hkv, D])", k, 4)
            if Bk != B:
                raise ShapeError(f"{op}: k_cache holds {Bk} sequences, q has {B}")
            geo = dict(B=B, q_rows=B * Sq, kv_rows=B * cap, layout=1, pages=0, max_pages=0)
        else:
            rows, Hkv, Dk = _spec3(f"{op}: k_cache (paged: [pages * page_size, Hkv, D])", k, 3)
            require(table, "u32", len(table.shape) == 2 and table.shape[0] == B,
                    f"{op}: block_table must be u32 [B={B}, max_pages], got {table.dtype} {table.shape}")
            if p.page_size < 1 or rows % p.page_size:
                raise ShapeError(f"{op}: a paged cache of {rows} rows needs page_size > 0 dividing it, "
                                 f"got {p.page_size}")
            geo = dict(B=B, q_rows=B * Sq, kv_rows=rows, layout=2, pages=rows // p.page_size,
                       max_pages=table.shape[1])
        # the kernels stride q / out by max_q and a contiguous cache by max_k, and bound a GPU cache_seqlens by
        # max_k: params from Program.update or a graph file must still describe the tensors
        capacity = _capacity(k.shape, None if table is None else table.shape, p.page_size)
        if p.max_k != capacity:
            raise ShapeError(f"{op}: max_k {p.max_k} is not the capacity of one sequence, {capacity} (k_cache "
                             f"{k.shape}, block_table {None if table is None else table.shape})")
        if p.max_q != Sq:
            raise ShapeError(f"{op}: max_q {p.max_q} is not the queries per sequence, {Sq} (q {q.shape})")
    geo.update(Hq=Hq, Hkv=Hkv, D=D, dtype=_heads(op, Hq, D, Hkv, Dk, q.dtype, k, v))
    return geo


def _capacity(cache_shape: tuple, table_shape: tuple | None, page_size: int) -> int:
    """Keys one sequence's cache holds: a contiguous cache's rows, or the pages of a block table's row; at most
    KV_LEN_MAX, the most keys the attention kernels index (a long table's keys past it wrapped their key loops)."""
    if table_shape is None:
        return cache_shape[1]
    return min(KV_LEN_MAX, table_shape[1] * page_size) if len(table_shape) == 2 else 0


def _check_fields(op: str, p: BatchedParams) -> None:
    """Every field of `p` by its rule (args.py), as the entry points check their arguments: params from a graph
    file or Program.update get the same checks."""
    args.flag(op, "causal", p.causal)
    args.window(op, "window", p.window)
    args.normal_real(op, "softcap", p.softcap, or_zero=True)
    args.flag(op, "return_lse", p.return_lse)
    args.integer(op, "max_q", p.max_q)
    args.integer(op, "max_k", p.max_k)
    args.optional_real(op, "scale", p.scale)
    args.integer(op, "page_size", p.page_size)
    args.integer(op, "seqlen_add", p.seqlen_add)
    if p.seqlen_add > p.max_k:
        raise LimitError(f"{op}: {p.seqlen_add} new rows per sequence do not fit the capacity of {p.max_k}")
    if p.mode == "kvcache" and p.max_k > KV_LEN_MAX:
        raise LimitError(f"{op}: a capacity of {p.max_k} keys per sequence is above {KV_LEN_MAX}, the most keys the "
                         f"attention kernels index")
    if p.variant is not None:
        args.text(op, "variant", p.variant)


def _infer_attend(p: BatchedParams, specs):
    geo = _geometry(p, specs)
    q = specs[0]
    outs = (TensorSpec(q.shape, q.dtype),)
    if p.return_lse:
        outs += (TensorSpec((geo["Hq"], geo["q_rows"]), "f32"),)
    return outs


def _infer(p: BatchedParams, specs):
    outs = _infer_attend(p, specs)
    if p.seqlen_add != 0:   # a graph file's or Program.update's: the attention would count rows nothing wrote
        raise ShapeError(f"attention_{p.mode}: seqlen_add {p.seqlen_add} is not the new rows per sequence, 0: this "
                         f"node appends none (attention_kvcache with k_new / v_new is one {NEW_ROWS_OP} node)")
    return outs


def plan_facts(p: BatchedParams, geo: dict) -> PlanFacts:
    """The attention planner's facts of a batched call: one query per sequence is a decode step; the kv span is
    the longest sequence's (max_seqlen_k, or a cache's capacity)."""
    return PlanFacts("decode" if p.max_q == 1 else "prefill", geo["dtype"], p.max_q, geo["Hq"], geo["D"], p.max_k,
                     layout="paged" if geo["layout"] == 2 else "contiguous", num_kv_heads=geo["Hkv"],
                     family="attention_batched", batch=max(1, geo["B"]))


def batched_plan(p: BatchedParams, geo: dict, caps) -> KernelPlan:
    """The KernelPlan of a batched call (the attention planner's rules for the attention_batched family), or the
    planner's error naming the op."""
    try:
        return plan(plan_facts(p, geo), caps, p.variant)
    except WgraphError as e:
        raise type(e)(f"attention_{p.mode}: {e}") from None


def _encode(ctx, p: BatchedParams, inputs, outputs):
    q, k, v, cu_q, kv_lens, table = inputs
    geo = _geometry(p, tuple(None if t is None else t.spec for t in inputs))
    out = outputs[0]
    lse = outputs[1] if p.return_lse else ctx.fallback("attention_batched.lse")
    B, Hq, Hkv, D = geo["B"], geo["Hq"], geo["Hkv"], geo["D"]
    if B == 0 or geo["q_rows"] == 0:
        return []
    u = {
        "batch": B, "num_heads": Hq, "num_kv_heads": Hkv, "head_dim": D, "q_rows": geo["q_rows"],
        "q_packed": int(p.mode == "varlen"), "max_q": p.max_q,
        "kv_rows": geo["kv_rows"], "max_k": p.max_k, "seqlen_add": p.seqlen_add,
        "page_size": max(1, p.page_size), "max_pages": geo["max_pages"], "num_pages": geo["pages"],
        "scale": p.scale if p.scale is not None else 1.0 / math.sqrt(D), "softcap": p.softcap,
        "causal": int(p.causal), "window_left": p.window[0], "window_right": p.window[1],
        "write_lse": int(p.return_lse), "num_chunks": 1,
    }
    # the k/v layout and soft-capping, compiled in (attention_batched_common.wgsl, attention_score.wgsl)
    c = {"KV_PACKED": geo["layout"] == 0, "KV_PAGED": geo["layout"] == 2, "SOFTCAP": p.softcap > 0}
    if geo["kv_rows"] == 0:
        k = v = ctx.fallback("attention_batched.no_kv", 64)   # no key is ever read
    reads = {"q": q, "k": k, "v": v, "cu_q": cu_q if cu_q is not None else ctx.fallback("attention_batched.cu_q"),
             "kv_lens": kv_lens, "block_table": table if table is not None else ctx.fallback("attention_batched.table")}
    kplan = batched_plan(p, geo, ctx.caps)
    ctx.chose(kplan)
    if kplan.max_chunks:   # split-K decode: the chunks' partials, then the combine
        (main, wg), (combine, cwg) = kplan.dispatches
        n = kplan.max_chunks
        u["num_chunks"] = n
        part_ml = ctx.scratch((B * Hq * n * 2,), "f32", "attention_batched.part_ml")
        part_acc = ctx.scratch((B * Hq * n * D,), "f32", "attention_batched.part_acc")
        parts = {"part_ml": part_ml, "part_acc": part_acc}
        return [
            ctx.dispatch(main, uniforms=u, bindings={**reads, **parts}, workgroups=wg,
                         label="attention_batched.decode", constants=c),
            ctx.dispatch(combine, uniforms=u, bindings={"cu_q": reads["cu_q"], "kv_lens": kv_lens,
                                                        "block_table": reads["block_table"], **parts,
                                                        "out": out, "lse": lse},
                         workgroups=cwg, label="attention_batched.combine", constants=c),
        ]
    ((variant, wg),) = kplan.dispatches
    return [ctx.dispatch(variant, uniforms=u, bindings={**reads, "out": out, "lse": lse}, workgroups=wg,
                         label=f"attention_{p.mode}", constants=c)]


BATCHED = register(OpDef("attention_batched", _infer, _encode,
                         inputs=("q", "k", "v", "cu_seqlens_q?", "cu_seqlens_k / cache_seqlens", "block_table?")))


# ---- writing new rows into the caches ----

@attrs.frozen
class AppendParams:
    page_size: int = 0


def _infer_append(p: AppendParams, specs):
    k_new, v_new, kc, vc, lens, table = specs
    B, S_new, Hkv, D = _spec3("attention_kvcache: k_new ([B, new rows, Hkv, D])", k_new, 4)
    if v_new is None or v_new.shape != k_new.shape:
        raise ShapeError(f"attention_kvcache: v_new {None if v_new is None else v_new.shape} must match "
                         f"k_new {k_new.shape}")
    if kc.shape[-2:] != (Hkv, D):
        raise ShapeError(f"attention_kvcache: k_new {k_new.dtype} {k_new.shape} does not fit the cache "
                         f"{kc.dtype} {kc.shape}")
    if not k_new.dtype == v_new.dtype == kc.dtype:   # the rows are copied as they are: no conversion
        raise DtypeError(f"attention_kvcache: k_new {k_new.dtype} and v_new {v_new.dtype} must have the caches' "
                         f"dtype, {kc.dtype}")
    seqs = table.shape[0] if table is not None else kc.shape[0]
    require(vc, kc.dtype, seqs == B and vc.shape == kc.shape,
            f"attention_kvcache: k_new holds {B} sequences; the caches {kc.shape} / {vc.shape} "
            f"(block_table {None if table is None else table.shape}) must hold as many and match")
    _check_u32("attention_kvcache: cache_seqlens", lens, (B,))
    select_variant("attention_batched_append", output_dtype=kc.dtype)
    return ()


def _encode_append(ctx, p: AppendParams, inputs, outputs):
    k_new, v_new, kc, vc, lens, table = inputs
    B, S_new, Hkv, D = k_new.shape
    total = k_new.size
    if total == 0:
        return []
    variant = select_variant("attention_batched_append", output_dtype=kc.dtype)
    grid = ctx.grid(ceil_div(total, kernel(variant).threads))
    paged = table is not None
    cap = _capacity(kc.shape, table.shape if paged else None, p.page_size)
    u = {"total": total, "row_elems": Hkv * D, "new_rows": S_new, "capacity": cap, "paged": int(paged),
         "page_size": max(1, p.page_size), "max_pages": table.shape[1] if paged else 0,
         "num_pages": kc.shape[0] // max(1, p.page_size) if paged else 1, "grid_x": grid[0]}   # 0: no page id fits
    return [ctx.dispatch(variant, uniforms=u, bindings={
        "k_new": k_new, "v_new": v_new, "cache_seqlens": lens,
        "block_table": table if paged else ctx.fallback("attention_batched.table"),
        "k_cache": kc, "v_cache": vc}, workgroups=grid, label="attention_kvcache.append")]


# attention_kvcache with new rows is ONE node, the append then the attention, so its params (seqlen_add: the rows the
# attention counts past cache_seqlens) are checked against its own k_new: as two nodes, a graph file (or
# Program.update) could set seqlen_add 0 or 2 for an append of 1 row, and the attention left out the new row or read
# a row nothing wrote, silently.
NEW_ROWS_OP = "attention_kvcache_new_rows"


def _infer_new_rows(p: BatchedParams, specs):
    outs = _infer_attend(p, specs[:6])
    q, kc, vc, cu_q, lens, table, k_new, v_new = specs
    if p.mode != "kvcache" or cu_q is not None:
        raise ShapeError(f"{NEW_ROWS_OP}: new rows are appended to caches: mode must be 'kvcache' without "
                         f"cu_seqlens_q, got mode {p.mode!r}")
    _infer_append(AppendParams(p.page_size), (k_new, v_new, kc, vc, lens, table))
    if p.seqlen_add != k_new.shape[1]:
        raise ShapeError(f"attention_kvcache: seqlen_add {p.seqlen_add} is not the new rows per sequence, "
                         f"{k_new.shape[1]} (k_new {k_new.shape})")
    return outs


def _encode_new_rows(ctx, p: BatchedParams, inputs, outputs):
    q, kc, vc, cu_q, lens, table, k_new, v_new = inputs
    return (_encode_append(ctx, AppendParams(p.page_size), (k_new, v_new, kc, vc, lens, table), ())
            + _encode(ctx, p, inputs[:6], outputs))


NEW_ROWS = register(OpDef(NEW_ROWS_OP, _infer_new_rows, _encode_new_rows, writes_inputs=(1, 2),
                          inputs=("q", "k_cache", "v_cache", "cu_seqlens_q?", "cache_seqlens", "block_table?",
                                  "k_new", "v_new")))


@attrs.frozen
class AdvanceParams:
    add: int


def _infer_advance(p: AdvanceParams, specs):
    (lens,) = specs
    require(lens, "u32", lens is not None and len(lens.shape) == 1,
            f"seqlens_advance: cache_seqlens must be a 1-D u32 tensor, got {lens}")
    args.integer("seqlens_advance", "n", p.add)
    return ()


def _encode_advance(ctx, p: AdvanceParams, inputs, outputs):
    (lens,) = inputs
    n = lens.shape[0]
    if n == 0:
        return []
    return [ctx.dispatch("seqlens_advance", uniforms={"count": n, "add": p.add}, bindings={"lens": lens},
                         workgroups=(ceil_div(n, kernel("seqlens_advance").threads), 1, 1), label="seqlens_advance")]


ADVANCE = register(OpDef("seqlens_advance", _infer_advance, _encode_advance, inputs=("cache_seqlens",)))


def seqlens_advance(cache_seqlens: TensorT, n: int = 1) -> None:
    """cache_seqlens[b] += n for every sequence, in place on the GPU (saturating): the last op of a recorded
    batched decode step, so each replay attends one more key per sequence.

    cache_seqlens: the u32 [B] tensor (or graph state value) `attention_kvcache` reads.
    n: what to add to each length (a u32)."""
    apply(ADVANCE, AdvanceParams(args.integer("seqlens_advance", "n", n)), (cache_seqlens,))


# ---- host-side values: checked here, then uploaded ----

def _is_device_value(x) -> bool:
    return isinstance(x, Tensor) or getattr(x, "_wgraph_symbol_", False)


def _spec_of(x) -> TensorSpec:
    """A GPU value's spec, or a host array's (the spec its upload will have)."""
    return x.spec if _is_device_value(x) else TensorSpec(x.shape, "u32")


def _upload(ref, arr: np.ndarray, name: str):
    """`arr` as a u32 tensor on ref's device, or a const of ref's graph."""
    arr = np.ascontiguousarray(arr, dtype=np.uint32)
    if getattr(ref, "_wgraph_symbol_", False):
        return ref.graph.const(f"{name}.{len(ref.graph.states)}", arr, "u32")
    return ref.device.tensor(arr, "u32")


def _check_cu(op: str, name: str, cu: np.ndarray, total: int, max_len: int, max_name: str):
    if cu.ndim != 1 or cu.size < 1:
        raise ShapeError(f"{op}: {name} must be [B + 1] offsets, got shape {cu.shape}")
    if cu[0] != 0:
        raise ShapeError(f"{op}: {name}[0] is {cu[0]}; the offsets start at 0")
    lens = np.diff(cu)
    for b in np.nonzero(lens < 0)[0][:1]:
        raise ShapeError(f"{op}: {name} decreases at sequence {b}: {name}[{b}] = {cu[b]} > "
                         f"{name}[{b + 1}] = {cu[b + 1]}")
    if cu[-1] != total:
        raise ShapeError(f"{op}: {name}[-1] = {cu[-1]} but the packed tensor has {total} rows")
    for b in np.nonzero(lens > max_len)[0][:1]:
        raise LimitError(f"{op}: sequence {b} has length {lens[b]} ({name}), above {max_name}={max_len}")


def _check_new_rows_unshared(op: str, table: np.ndarray, lens: np.ndarray, n_new: int, page_size: int) -> None:
    """AliasingError where a new row of a paged call lands on a pool row that another key of the call (another
    sequence's, or another position of its own) is read from too: two sequences' new rows raced for the row (which
    one each attended was the GPU's choice), or one overwrote a key another sequence attends (a shared page not
    copied first). Shared pages that no new row goes to (a common prefix) are fine. Only the pages holding new
    rows are expanded, so the cost follows the new rows, not the pool."""
    B, max_pages = table.shape
    ends = lens + n_new   # the keys each sequence attends
    w_seq = np.repeat(np.arange(B), n_new)
    w_pos = (lens[:, None] + np.arange(n_new)[None, :]).ravel()
    w_rows = table[w_seq, w_pos // page_size] * page_size + w_pos % page_size
    # every (sequence, page index) read whose page holds a new row, expanded to its positions that are read
    read = np.arange(max_pages)[None, :] < -(-ends // page_size)[:, None]
    seqs, idx = np.nonzero(read & np.isin(table, table[w_seq, w_pos // page_size]))
    pos = (idx[:, None] * page_size + np.arange(page_size)[None, :]).ravel()
    seqs = np.repeat(seqs, page_size)
    keep = pos < ends[seqs]
    seqs, pos = seqs[keep], pos[keep]
    rows = table[seqs, pos // page_size] * page_size + pos % page_size
    for b, t, row in zip(w_seq, w_pos, w_rows):
        other = np.nonzero((rows == row) & ((seqs != b) | (pos != t)))[0]
        if len(other):
            b2, t2 = seqs[other[0]], pos[other[0]]
            raise AliasingError(
                f"{op}: sequence {b}'s new row at position {t} goes to pool row {row} (block_table[{b}, "
                f"{t // page_size}] = {table[b, t // page_size]}, page_size {page_size}), which sequence {b2} "
                f"reads at position {t2} too (block_table[{b2}, {t2 // page_size}]): the write would race with or "
                f"overwrite that key; give the pages that take new rows to one sequence (copy a shared page first)")


def _options(op: str, causal, scale, window, softcap, return_lse, variant) -> dict:
    """The options both batched calls take, each checked by its rule (args.py)."""
    if variant is not None:
        # np.str_ by its characters, as args.choice reads one; the plain str from here
        name = args.plain_str(variant)
        k = registry().get(name) if name is not None else None
        if k is None or k.op != "attention_batched":
            raise PlanError(f"{op}: variant={args.show(variant)} is not a batched attention kernel; None plans one")
        variant = name
    return dict(causal=require_causal(op, causal), scale=args.optional_real(op, "scale", scale),
                window=window_of(window, 0, op), softcap=args.normal_real(op, "softcap", softcap, or_zero=True),
                return_lse=args.flag(op, "return_lse", return_lse), variant=variant)


def _plan_now(p: BatchedParams, specs, q) -> None:
    """Validate and plan a tensor call now (the LimitError of lavapipe's loop cap and of the grid included), so
    it fails before anything is uploaded or written; a graph plans at compile."""
    geo = _geometry(p, specs)
    if not isinstance(q, Tensor):
        return
    caps = q.device.caps
    limit = caps.max_workgroups_per_dim
    for variant, groups in batched_plan(p, geo, caps).dispatches:
        if max(groups) > limit:
            raise LimitError(f"attention_{p.mode}: {variant} needs workgroups {tuple(groups)} for {geo['B']} "
                             f"sequences of up to {p.max_q} queries; the device allows {limit} per dimension")


def attention_varlen(q: TensorT, k: TensorT, v: TensorT, cu_seqlens_q: Ids, cu_seqlens_k: Ids, *, max_seqlen_q: int,
                     max_seqlen_k: int, causal: bool, scale: float | None = None, window: tuple[int, int] = (-1, -1),
                     softcap: float = 0.0, return_lse: bool = False, variant: str | None = None,
                     out: TensorT | None = None) -> Any:
    """FlashAttention 2's varlen attention: B sequences packed along the rows, each attending to its own keys.
    Returns out [total_q, Hq, D] in q's dtype, or (out, lse [Hq, total_q] f32) with return_lse.

    q: queries [total_q, Hq, D]. k, v: keys and values [total_k, Hkv, D] (Hq a multiple of Hkv).
    cu_seqlens_q, cu_seqlens_k: u32 [B + 1] offsets: sequence b's queries are rows cu_seqlens_q[b] ..
        cu_seqlens_q[b + 1] - 1 of q, its keys those of cu_seqlens_k in k and v; host lists / numpy arrays
        (checked) or u32 GPU tensors.
    max_seqlen_q, max_seqlen_k: the longest sequence's query and key counts (they size the grid).
    causal: required, True or False: key j of a sequence's query i is masked when it lies after the query,
        bottom-right aligned per sequence (the queries are the last positions of their sequence).
    scale: the scores' factor; None: 1 / sqrt(D).
    window: FlashAttention's window_size (left, right); -1 leaves a side unbounded.
    softcap: c > 0 caps the scaled scores as c * tanh(s / c); 0 is off.
    return_lse: also return lse [Hq, total query rows] f32, the log-sum-exp of each query's visible scores.
    variant: force a batched attention kernel of the registry by name; None: planned.
    out: a tensor (in a graph: a state value) of the output's shape and dtype to write into."""
    op = "attention_varlen"
    for name, x in (("q", q), ("k", k), ("v", v)):
        tensor_arg(op, name, x)
    max_q = args.integer(op, "max_seqlen_q", max_seqlen_q)
    max_k = args.integer(op, "max_seqlen_k", max_seqlen_k)
    p = BatchedParams("varlen", max_q=max_q, max_k=max_k,
                      **_options(op, causal, scale, window, softcap, return_lse, variant))
    cus = []
    for name, cu, x, mx, mx_name in (("cu_seqlens_q", cu_seqlens_q, q, max_q, "max_seqlen_q"),
                                     ("cu_seqlens_k", cu_seqlens_k, k, max_k, "max_seqlen_k")):
        if not _is_device_value(cu):
            cu = args.ids(op, name, cu)
            _check_cu(op, name, cu, x.shape[0], mx, mx_name)
        cus.append(cu)
    if _spec_of(cus[0]).shape != _spec_of(cus[1]).shape:
        raise ShapeError(f"{op}: cu_seqlens_q {_spec_of(cus[0]).shape} and cu_seqlens_k {_spec_of(cus[1]).shape} "
                         f"hold different batch sizes")
    _plan_now(p, (q.spec, k.spec, v.spec, _spec_of(cus[0]), _spec_of(cus[1]), None), q)
    cus = [cu if _is_device_value(cu) else _upload(q, cu, f"{op}.{name}")
           for cu, name in zip(cus, ("cu_seqlens_q", "cu_seqlens_k"))]
    return _apply_as(op, BATCHED, p, (q, k, v, cus[0], cus[1], None), out)


def _apply_as(op: str, opdef: OpDef, p: BatchedParams, inputs: tuple, out) -> Any:
    """apply(), its errors named by the call the caller made."""
    with _errors_named(opdef.name, op):
        return apply(opdef, p, inputs, out=out)


@contextlib.contextmanager
def _errors_named(internal: str, caller: str):
    """The WgraphErrors raised inside, their leading "internal: " said as "caller: ": "attention_batched: out= has
    shape (4, 2, 4), the op makes (4, 2, 8)" for an attention_varlen call named an op the caller never called."""
    try:
        yield
    except WgraphError as e:
        msg = str(e)
        if not msg.startswith(f"{internal}: "):
            raise
        raise type(e)(f"{caller}: {msg[len(internal) + 2:]}") from None


def _fits(out, q, return_lse: bool) -> bool:
    """Whether `out` is a Tensor of q's device, or a state of q's graph, holding exactly a batch of one's output
    (else the batched path takes the call, and its checks name what is wrong). A graph value takes the path a
    Tensor takes, so a program plans the kernels the immediate call runs (the batched kernel's sums differ in
    their last bits)."""
    if return_lse or getattr(out, "shape", None) != q.shape or getattr(out, "dtype", None) != q.dtype:
        return False
    if type(out) is Tensor:
        return isinstance(q, Tensor) and out.device is q.device
    # a value that is no state goes the batched way too, whose error names it (not the view made of it here)
    return bool(getattr(out, "_wgraph_symbol_", False) and getattr(q, "_wgraph_symbol_", False)
                and out.graph is q.graph and out.graph.base.get(out.name) in out.graph.states)


def _one_sequence(p: BatchedParams, q, k_cache, v_cache, cache_seqlens, block_table, out) -> Any:
    """A checked kvcache call of one sequence without new rows, run as the single-sequence `attention` over its
    cache (the same kernels the batched planner's twins copy, without the batch's indexing: a batch of one is
    never slower than one sequence): the output [1, Sq, Hq, D] (into `out`, a Tensor, when given) and lse
    [Hq, Sq] as the batched call's."""
    from wgraph.ops.attention import attention
    from wgraph.ops.dense import reshape

    _, sq, hq, d = q.shape
    if _is_device_value(cache_seqlens):
        kv_len = cache_seqlens   # u32 [1], read at dispatch time
    else:
        kv_len = int(cache_seqlens[0])
    paged = {}
    if block_table is not None:   # the sequence's row of the table
        if _is_device_value(block_table):
            table = reshape(block_table, _spec_of(block_table).shape[1])
        else:
            table = _upload(q, block_table[0], "attention_kvcache.block_table")
        paged = dict(kv_layout="paged", page_table=table, page_size=p.page_size)
        k, v = k_cache, v_cache
    else:
        k, v = (reshape(c, *c.shape[1:]) for c in (k_cache, v_cache))
    if out is not None:
        paged["out"] = out.reshape(sq, hq, d)
    with _errors_named("attention", "attention_kvcache (one sequence)"):   # out= aliasing the cache, say
        result = attention(reshape(q, sq, hq, d), k, v, causal=p.causal, scale=p.scale, kv_len=kv_len,
                           window=p.window, softcap=p.softcap, return_lse=p.return_lse, **paged)
    if p.return_lse:
        return reshape(result[0], 1, sq, hq, d), result[1]
    return out if out is not None else reshape(result, 1, sq, hq, d)


def attention_kvcache(q: TensorT, k_cache: TensorT, v_cache: TensorT, *, cache_seqlens: Ids,
                      k_new: TensorT | None = None, v_new: TensorT | None = None, block_table: Ids | None = None,
                      page_size: int | None = None, causal: bool, scale: float | None = None,
                      window: tuple[int, int] = (-1, -1), softcap: float = 0.0, return_lse: bool = False,
                      variant: str | None = None, out: TensorT | None = None) -> Any:
    """FlashAttention 2's kvcache attention: B sequences' queries against their caches. The whole call is
    validated and planned before the new rows are written: an error leaves the caches as they were. Returns out
    [B, Sq, Hq, D] in q's dtype, or (out, lse [Hq, B * Sq] f32) with return_lse.

    q: queries [B, Sq, Hq, D].
    k_cache, v_cache: [B, capacity, Hkv, D] (one cache per sequence), or a paged pool [pages * page_size, Hkv,
        D] with block_table.
    cache_seqlens: u32 [B]: how many keys each sequence's cache holds (ints, a numpy array or a u32 GPU tensor).
        Not changed by the call (seqlens_advance does that).
    k_new, v_new: [B, S_new, Hkv, D] rows written into the caches at cache_seqlens[b] first and attended too;
        both or neither.
    block_table: u32 [B, max_pages] for a paged pool: sequence b's key j is at row block_table[b, j //
        page_size] * page_size + j % page_size; None: one contiguous cache per sequence.
    page_size: rows per page of the paged pool (with block_table only).
    causal: required, True or False: key j of a sequence's query i is masked when it lies after the query,
        bottom-right aligned per sequence (the queries are the last positions of their sequence).
    scale: the scores' factor; None: 1 / sqrt(D).
    window: FlashAttention's window_size (left, right); -1 leaves a side unbounded.
    softcap: c > 0 caps the scaled scores as c * tanh(s / c); 0 is off.
    return_lse: also return lse [Hq, total query rows] f32, the log-sum-exp of each query's visible scores.
    variant: force a batched attention kernel of the registry by name; None: planned.
    out: a tensor (in a graph: a state value) of the output's shape and dtype to write into.
    A batch of one without new rows, out or variant runs the single-sequence `attention` over its cache."""
    op = "attention_kvcache"
    for name, x in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        tensor_arg(op, name, x)
    for name, x in (("k_new", k_new), ("v_new", v_new)):
        if x is not None:
            tensor_arg(op, name, x)
    options = _options(op, causal, scale, window, softcap, return_lse, variant)
    if (k_new is None) != (v_new is None):
        raise ShapeError(f"{op}: give both k_new and v_new or neither")
    if len(q.shape) != 4:
        raise ShapeError(f"{op}: q must be [B, Sq, Hq, D], got {q.shape}")
    B = q.shape[0]
    paged = block_table is not None
    if paged:
        if not _is_device_value(block_table):
            block_table = args.ids(op, "block_table", block_table, ndim=2)
        page_size = args.integer(op, "page_size", page_size, 1)
        if len(k_cache.shape) != 3 or k_cache.shape[0] % page_size:
            raise ShapeError(f"{op}: a paged k_cache must be [pages * page_size, Hkv, D] with page_size {page_size}, "
                             f"got {k_cache.shape}")
        pages = k_cache.shape[0] // page_size
        if not _is_device_value(block_table):
            if block_table.shape[0] != B:
                raise ShapeError(f"{op}: block_table must be [B={B}, max_pages], got shape {block_table.shape}")
            bad = np.argwhere(block_table >= pages)
            if len(bad):
                b, i = bad[0]
                raise LimitError(f"{op}: block_table[{b}, {i}] = {block_table[b, i]} (sequence {b}) is not a page "
                                 f"of the cache, which has {pages} pages")
        else:   # its shape before the capacity it gives: a 1-D one gave capacity 0, named as the lengths' fault
            t = _spec_of(block_table)
            require(t, "u32", len(t.shape) == 2 and t.shape[0] == B,
                    f"{op}: block_table must be u32 [B={B}, max_pages], got {t.dtype} {t.shape}")
        capacity = _capacity(k_cache.shape, _spec_of(block_table).shape, page_size)
    else:
        if page_size is not None:
            raise args.fail(op, "page_size", page_size, "None without block_table (a contiguous cache)")
        if len(k_cache.shape) != 4:
            raise ShapeError(f"{op}: a contiguous k_cache must be [B, capacity, Hkv, D], got {k_cache.shape}")
        capacity = _capacity(k_cache.shape, None, 0)
    n_new = 0 if k_new is None else (k_new.shape[1] if len(k_new.shape) == 4 else 0)
    if n_new > capacity:
        raise LimitError(f"{op}: {n_new} new rows per sequence do not fit the capacity of {capacity}")
    if not _is_device_value(cache_seqlens):
        cache_seqlens = args.ids(op, "cache_seqlens", cache_seqlens)
        if cache_seqlens.shape != (B,):
            raise ShapeError(f"{op}: cache_seqlens must be [B={B}], got shape {cache_seqlens.shape}")
        for b in np.nonzero(cache_seqlens + n_new > capacity)[0][:1]:
            raise LimitError(f"{op}: sequence {b}: cache_seqlens {cache_seqlens[b]} + {n_new} new rows = "
                             f"{cache_seqlens[b] + n_new} is above the capacity of {capacity}"
                             + (" (the most keys the attention kernels index)" if capacity == KV_LEN_MAX else ""))
        if paged and n_new and not _is_device_value(block_table):
            _check_new_rows_unshared(op, block_table, cache_seqlens, n_new, page_size)
    p = BatchedParams("kvcache", max_q=q.shape[1], max_k=capacity, page_size=page_size or 0, seqlen_add=n_new,
                      **options)
    append_p = AppendParams(page_size or 0)
    specs = (q.spec, k_cache.spec, v_cache.spec, None, _spec_of(cache_seqlens),
             None if block_table is None else _spec_of(block_table))
    _plan_now(p, specs, q)   # every check of both ops before anything is uploaded or written
    if B == 1 and k_new is None and variant is None and (out is None or _fits(out, q, return_lse)):
        return _one_sequence(p, q, k_cache, v_cache, cache_seqlens, block_table, out)
    if k_new is not None:
        _infer_append(append_p, (k_new.spec, v_new.spec, k_cache.spec, v_cache.spec, specs[4], specs[5]))
    if not _is_device_value(cache_seqlens):
        cache_seqlens = _upload(q, cache_seqlens, f"{op}.cache_seqlens")
    if block_table is not None and not _is_device_value(block_table):
        block_table = _upload(q, block_table, f"{op}.block_table")
    inputs = (q, k_cache, v_cache, None, cache_seqlens, block_table)
    if k_new is None:
        return _apply_as(op, BATCHED, p, inputs, out)
    return _apply_as(op, NEW_ROWS, p, inputs + (k_new, v_new), out)
