"""`rope_kv_append`: a decoder's RoPE of q and k and its KV-cache append of k and v in ONE dispatch, reading the
stacked q/k/v output of one linear (`linear(x, [Wq; Wk; Wv])`, the GEMV with a fused norm): returns q rotated,
writes k (rotated) and v into the caches in place, f32 or f16 caches (wgraph/shaders/rope_kv_append.wgsl)."""

from __future__ import annotations

import attrs

from wgraph import args
from wgraph.api_types import TensorT
from wgraph.errors import DtypeError, LimitError, ShapeError
from wgraph.kernels.registry import kernel, select_variant
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.ops.kv_cache import (LAYOUTS, WriteParams, _cache_capacity, _check_pos_tensor, _check_positions,
                                 _check_write_fields, _pair, _write_params, _kernel_capacity)
from wgraph.tensor import TensorSpec


@attrs.frozen
class RopeKVParams:
    q_heads: int
    pos: int = 0  # position of row 0 (plus pos_buf[0] on the GPU when a position tensor is given)
    layout: str = "contiguous"
    page_size: int = 0


def _infer(params: RopeKVParams, specs):
    return (check_rope_kv("rope_kv_append", params, specs),)


def check_rope_kv(op: str, params: RopeKVParams, specs) -> TensorSpec:
    """q's spec [rows, q_heads, D] f32 after checking rope_kv_append's inputs (qkv, cos, sin, k cache, v cache,
    page table, position tensor); errors name `op` (linear_rope_kv_append checks its own this way)."""
    qkv, cos_t, sin_t, k_cache, v_cache, table, pos_t = specs
    if len(k_cache.shape) != 3 or v_cache.shape != k_cache.shape:
        raise ShapeError(f"{op}: k and v caches must be one shape [rows, kv_heads, head_dim], got {k_cache.shape} "
                         f"and {v_cache.shape}")
    if k_cache.dtype != v_cache.dtype:
        raise DtypeError(f"{op}: k cache {k_cache.dtype} and v cache {v_cache.dtype} differ")
    _, hkv, d = k_cache.shape
    hq = args.integer(op, "q_heads", params.q_heads, 1)
    write = WriteParams(params.layout, params.pos, params.page_size)
    _check_write_fields(op, write)
    if d % 2:
        raise ShapeError(f"{op}: head_dim must be even, got caches {k_cache.shape}")
    if len(qkv.shape) != 2 or qkv.shape[1] != (hq + 2 * hkv) * d:
        raise ShapeError(f"{op}: qkv must be [rows, (q_heads + 2 kv_heads) * head_dim] = [rows, {(hq + 2 * hkv) * d}] "
                         f"for {hq} q heads and caches {k_cache.shape}, got {qkv.shape}")
    check_qkv_tables(op, qkv, cos_t, sin_t, d)
    rows = qkv.shape[0]
    if pos_t is None and rows and params.pos + rows > cos_t.shape[0]:
        raise LimitError(f"{op}: positions {params.pos}..{params.pos + rows - 1} (pos + pos_offset + row) exceed "
                         f"the tables' {cos_t.shape[0]} rows")
    _check_pos_tensor(pos_t, op)
    _check_positions(write, rows, _cache_capacity(write, k_cache.shape[0], table, op), pos_t is not None, op)
    select_variant("rope_kv_append", cache_dtype=k_cache.dtype)
    return TensorSpec((rows, hq, d), "f32")


def check_qkv_tables(op: str, qkv, cos_t, sin_t, d: int) -> None:
    """qkv f32 and the RoPE tables f32 [max_pos, d / 2], one shape (the rope_kv_append family's common checks)."""
    if qkv.dtype != "f32":
        raise DtypeError(f"{op}: qkv must be f32, got {qkv.dtype}")
    for name, t in (("cos", cos_t), ("sin", sin_t)):
        if len(t.shape) != 2 or t.shape[1] != d // 2 or t.dtype != "f32":
            # f16 tables of the right shape: a DtypeError, as rope's (it was a ShapeError naming no wrong shape)
            shaped = len(t.shape) == 2 and t.shape[1] == d // 2
            raise (DtypeError if shaped else ShapeError)(
                f"{op}: {name} table must be f32 [max_pos, {d // 2}] for head_dim {d}, got {t.dtype} {t.shape}")
    if cos_t.shape != sin_t.shape:
        raise ShapeError(f"{op}: cos {cos_t.shape} and sin {sin_t.shape} tables differ")


def kernel_uniforms(params: RopeKVParams, rows: int, specs) -> dict:
    """rope_kv_pair.wgsl's uniform fields (shaders/rope_kv_fields.wgsl) for `rows` rows and the (cos, sin, k
    cache, v cache, page table, position tensor) inputs."""
    cos_t, _sin, k_cache, _v, table, pos_t = specs
    _, hkv, d = k_cache.shape
    capacity = _kernel_capacity(params.layout, k_cache.shape[0], table, params.page_size)
    return {"n_rows": rows, "q_heads": params.q_heads, "kv_heads": hkv, "half": d // 2,
            "table_rows": cos_t.shape[0], "capacity": capacity, "dst_layout": LAYOUTS[params.layout],
            "page_size": max(1, params.page_size), "pos": params.pos, "use_pos_buf": int(pos_t is not None),
            "src_layout": 0, "src_ring": 1, "src_row0": 0}


def kernel_bindings(ctx, tensors, q) -> dict:
    """rope_kv_pair.wgsl's bindings: the (cos, sin, k cache, v cache, page table, position tensor) inputs and q."""
    cos_t, sin_t, k_cache, v_cache, table, pos_t = tensors
    return {"cos_t": cos_t, "sin_t": sin_t,
            "page_table": table if table is not None else ctx.fallback("kv.page_table"),
            "pos_buf": pos_t if pos_t is not None else ctx.fallback("kv.pos"),
            "q": q, "k_cache": k_cache, "v_cache": v_cache}


def _encode(ctx, params: RopeKVParams, inputs, outputs):
    (qkv, *rest), (q,) = inputs, outputs
    variant = select_variant("rope_kv_append", cache_dtype=rest[2].dtype)
    rows = qkv.shape[0]
    _, hkv, d = rest[2].shape
    threads = rows * (params.q_heads + 2 * hkv) * (d // 2)
    return [ctx.dispatch(variant, uniforms=kernel_uniforms(params, rows, rest),
                         bindings={"qkv": qkv, **kernel_bindings(ctx, rest, q)},
                         workgroups=ctx.grid(ceil_div(threads, kernel(variant).threads)), label="rope_kv_append")]


# inputs 3 and 4 (the caches) are written in place besides the output q
ROPE_KV_APPEND = register(OpDef("rope_kv_append", _infer, _encode, writes_inputs=(3, 4),
                                inputs=("qkv", "cos", "sin", "cache[0]", "cache[1]", "page_table?", "pos?")))


def rope_kv_append(qkv: TensorT, cos: TensorT, sin: TensorT, cache: tuple[TensorT, TensorT], pos: int | TensorT, *,
                   q_heads: int, layout: str = "contiguous", page_table: TensorT | None = None, page_size: int = 0,
                   pos_offset: int = 0) -> TensorT:
    """q [rows, q_heads, D] f32: the q heads of qkv [rows, (q_heads + 2 kv_heads) * D] rotated (rotate-half RoPE,
    tables [max_pos, D / 2] f32) at positions pos + r; the k heads, rotated, and the v heads are written into
    cache = (k_cache, v_cache) [L, kv_heads, D] (f32 or f16) at those positions, in place (`layout`,
    `page_table`, `page_size` as kv_append). One dispatch. `pos` is an int (checked against the tables and the
    cache) or a u32 GPU tensor (plus `pos_offset`) read at dispatch time; positions a GPU value puts beyond the
    tables or the cache are reported on the device error flag (q's row zeros, no cache row written).

    qkv: [rows, (q_heads + 2 kv_heads) * D] f32, the output of one linear over stacked q, k and v weights.
    cos, sin: the RoPE tables [max_pos, D / 2] f32 (rope_tables).
    cache: (k_cache, v_cache) [L, kv_heads, D], f32 or f16, written in place.
    pos: the first row's position: an int or a u32 tensor with one value read at dispatch time.
    q_heads: how many of qkv's heads are q heads (the rest split evenly into k and v).
    layout: the cache's, as kv_append's: "contiguous", "ring" or "paged".
    page_table: "paged" only: a 1-D u32 tensor of page ids.
    page_size: "paged" only: rows per page.
    pos_offset: added to pos: the rows sit at pos + pos_offset + r.
    """
    op = "rope_kv_append"
    k_cache, v_cache = _pair(op, "cache", cache)
    q_heads = args.integer(op, "q_heads", q_heads, 1)
    write, pos_t = _write_params(op, pos, layout, page_size, pos_offset, None, 0, 0, None)
    params = RopeKVParams(q_heads, write.pos, write.layout, write.page_size)
    return apply(ROPE_KV_APPEND, params, (qkv, cos, sin, k_cache, v_cache, page_table, pos_t))
