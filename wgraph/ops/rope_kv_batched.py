"""`rope_kv_append_batched`: `rope_kv_append` for a batched decode step, where every sequence has its own
position. Row b of the stacked q/k/v output of one linear ([B, (q_heads + 2 kv_heads) * D]) is sequence b's new
token at position pos[b] (a u32 GPU value per sequence): q comes back rotated, k (rotated) and v are written into
row pos[b] of sequence b's cache ([B, capacity, kv_heads, D], f32 or f16), in place. One dispatch whatever B
(wgraph/shaders/rope_kv_append_batched.wgsl)."""

from __future__ import annotations

import attrs

from wgraph import args
from wgraph.api_types import TensorT
from wgraph.errors import DtypeError, ShapeError
from wgraph.kernels.registry import kernel, select_variant
from wgraph.ops.kv_cache import _pair
from wgraph.ops.rope_kv import check_qkv_tables
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.tensor import TensorSpec, require

OP = "rope_kv_append_batched"


@attrs.frozen
class RopeKVBatchedParams:
    q_heads: int


def _infer(params: RopeKVBatchedParams, specs):
    qkv, cos_t, sin_t, k_cache, v_cache, pos = specs
    if len(k_cache.shape) != 4 or v_cache.shape != k_cache.shape:
        raise ShapeError(f"{OP}: k and v caches must be one shape [batch, capacity, kv_heads, head_dim], got "
                         f"{k_cache.shape} and {v_cache.shape}")
    if k_cache.dtype != v_cache.dtype:
        raise DtypeError(f"{OP}: k cache {k_cache.dtype} and v cache {v_cache.dtype} differ")
    batch, _, hkv, d = k_cache.shape
    # by its rule, as the call checks it: params from Program.update or a graph file (True, 1.0 reached q's
    # TensorSpec and were named as a bad shape there)
    hq = args.integer(OP, "q_heads", params.q_heads, 1)
    if d % 2:
        raise ShapeError(f"{OP}: head_dim must be even, got caches {k_cache.shape}")
    width = (hq + 2 * hkv) * d
    if qkv.shape != (batch, width):
        raise ShapeError(f"{OP}: qkv must be [batch, (q_heads + 2 kv_heads) * head_dim] = [{batch}, {width}] for "
                         f"{hq} q heads and caches {k_cache.shape}, got {qkv.shape}")
    check_qkv_tables(OP, qkv, cos_t, sin_t, d)
    got = None if pos is None else f"{pos.dtype} {pos.shape}"
    require(pos, "u32", pos is not None and pos.shape == (batch,),
            f"{OP}: pos must be u32 [batch={batch}] (one position per sequence), got {got}")
    select_variant(OP, cache_dtype=k_cache.dtype)
    return (TensorSpec((batch, hq, d), "f32"),)


def _encode(ctx, params: RopeKVBatchedParams, inputs, outputs):
    (qkv, cos_t, sin_t, k_cache, v_cache, pos), (q,) = inputs, outputs
    variant = select_variant(OP, cache_dtype=k_cache.dtype)
    batch, capacity, hkv, d = k_cache.shape
    uniforms = {"batch": batch, "q_heads": params.q_heads, "kv_heads": hkv, "half": d // 2,
                "table_rows": cos_t.shape[0], "capacity": capacity}
    threads = batch * (params.q_heads + 2 * hkv) * (d // 2)
    return [ctx.dispatch(variant, uniforms=uniforms,
                         bindings={"qkv": qkv, "cos_t": cos_t, "sin_t": sin_t, "pos": pos, "q": q,
                                   "k_cache": k_cache, "v_cache": v_cache},
                         workgroups=ctx.grid(ceil_div(threads, kernel(variant).threads)), label=OP)]


# inputs 3 and 4 (the caches) are written in place besides the output q
ROPE_KV_APPEND_BATCHED = register(OpDef(OP, _infer, _encode, writes_inputs=(3, 4),
                                        inputs=("qkv", "cos", "sin", "cache[0]", "cache[1]", "pos")))


def rope_kv_append_batched(qkv: TensorT, cos: TensorT, sin: TensorT, cache: tuple[TensorT, TensorT], pos: TensorT, *,
                           q_heads: int) -> TensorT:
    """q [B, q_heads, D] f32: the q heads of qkv [B, (q_heads + 2 kv_heads) * D] rotated (rotate-half RoPE,
    tables [max_pos, D / 2] f32), row b at position pos[b] (pos: u32 [B] on the GPU, read at dispatch time); the k
    heads, rotated, and the v heads are written into row pos[b] of sequence b of cache = (k_cache, v_cache)
    [B, capacity, kv_heads, D] (f32 or f16), in place. One dispatch. A position beyond the tables (q's row zeros,
    no cache row written) or beyond the capacity (no cache row written) is reported on the device error flag; one
    beyond both as beyond the tables.

    qkv: [B, (q_heads + 2 kv_heads) * D] f32, one row per sequence.
    cos, sin: the RoPE tables [max_pos, D / 2] f32 (rope_tables).
    cache: (k_cache, v_cache) [B, capacity, kv_heads, D], f32 or f16, written in place.
    pos: u32 [B] on the GPU, each sequence's position.
    q_heads: how many of qkv's heads are q heads (the rest split evenly into k and v).
    """
    q_heads = args.integer(OP, "q_heads", q_heads, 1)
    k_cache, v_cache = _pair(OP, "cache", cache)   # a tuple or a list, as rope_kv_append and kv_append take
    return apply(ROPE_KV_APPEND_BATCHED, RopeKVBatchedParams(q_heads), (qkv, cos, sin, k_cache, v_cache, pos))
