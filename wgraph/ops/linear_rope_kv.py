"""`linear_rope_kv_append`: a decoder's q/k/v projection (the GEMV over stacked [Wq; Wk; Wv], norm and bias
fused) with RoPE of q and k and the KV-cache append of k and v in its epilogue: ONE dispatch for 1..8 rows
(wgraph/shaders/gemv_rope_kv.wgsl, planned from registry/gemv_rope_kv.toml as linear's GEMV from gemv.toml).
A call no fused variant takes (more rows: prefill; in_features no 16-byte load divides; no kernel for the
dtypes) runs `linear` then `rope_kv_append`, the same math, and its plan says so. A QuantizedWeight's call is
linear_rope_kv_q.py's op (the quantized GEMV with the same epilogue)."""

from __future__ import annotations

import functools

import attrs

from wgraph import args
from wgraph.api_types import TensorT
from wgraph.errors import ShapeError, WgraphError
from wgraph.ggml_blocks import QuantizedWeight
from wgraph.kernels.registry import kernel
from wgraph.ops import gemv, rope_kv
from wgraph.ops.core import OpDef, apply, register
from wgraph.ops.dense import LINEAR, LinearParams, _infer_linear, plan_linear
from wgraph.ops.kv_cache import _pair, _write_params
from wgraph.ops.linear_rope_kv_q import LINEAR_ROPE_KV_APPEND_Q, LinearRopeKVPlan, QuantLinearRopeKVParams
from wgraph.ops.quantized import _weight as quant_weight
from wgraph.ops.rope_kv import ROPE_KV_APPEND, RopeKVParams, check_rope_kv

OP = "linear_rope_kv_append"


@attrs.frozen
class LinearRopeKVParams:
    q_heads: int
    eps: float = 1e-6
    pos: int = 0  # position of row 0 (plus pos_buf[0] on the GPU when a position tensor is given)
    layout: str = "contiguous"
    page_size: int = 0

    @property
    def rope(self) -> RopeKVParams:
        return RopeKVParams(self.q_heads, self.pos, self.layout, self.page_size)


@functools.lru_cache(maxsize=256)  # a pure function of the shape, the dtypes, the caps and the registry
def plan_linear_rope_kv(rows: int, n: int, k: int, weight_dtype: str, cache_dtype: str, caps, *,
                        norm: bool = False) -> LinearRopeKVPlan:
    """The first variant of registry/gemv_rope_kv.toml for the weight and cache dtypes that takes the call (the
    GEMV's rules, rows paired as swiglu's), else linear's plan followed by rope_kv_append."""
    kernels = gemv.gemv_kernels(weight_dtype, OP, cache_dtype=cache_dtype)
    s = gemv.GemvShape(rows, n, k, weight_dtype, swiglu=True)
    if not kernels:
        kv, why = None, f"no fused kernel for {weight_dtype} weights and {cache_dtype} caches"
    elif rows < 1 or k < 1:
        kv, why = None, f"{rows} rows of {k} features"
    else:
        kv, why = gemv.choose(s, caps, kernels)
    if kv is not None:
        return LinearRopeKVPlan(kv.name, why + "; RoPE and the K/V append in its epilogue", True)
    lin = plan_linear(rows, n, k, weight_dtype, caps, norm=norm)
    return LinearRopeKVPlan(lin.variant, f"not fused ({why}): linear ({lin.reason}), then rope_kv_append", False)


def _infer(params: LinearRopeKVParams, specs):
    x, w, b, norm, cos_t, sin_t, k_cache, v_cache, table, pos_t = specs
    if len(x.shape) != 2:
        raise ShapeError(f"{OP}: x must be [rows, in], got {x.shape}")
    try:
        (qkv,) = _infer_linear(LinearParams(params.eps), (x, w, b, norm, None))
    except WgraphError as e:  # linear's checks, named as this op's
        raise type(e)(f"{OP}: {e}") from None
    if len(k_cache.shape) == 3:
        hkv, d = k_cache.shape[1:]
        want = (args.integer(OP, "q_heads", params.q_heads, 1) + 2 * hkv) * d
        if w.shape[0] != want:
            raise ShapeError(f"{OP}: w must be [(q_heads + 2 kv_heads) * head_dim, in] = [{want}, in] for "
                             f"{params.q_heads} q heads and caches {k_cache.shape}, got {w.shape}")
    return (check_rope_kv(OP, params.rope, (qkv, cos_t, sin_t, k_cache, v_cache, table, pos_t)),)


def _encode(ctx, params: LinearRopeKVParams, inputs, outputs):
    (x, w, b, norm, *rest), (q,) = inputs, outputs
    rows, k = x.shape
    n = w.shape[0]
    plan = plan_linear_rope_kv(rows, n, k, w.dtype, rest[2].dtype, ctx.caps, norm=norm is not None)
    if not plan.fused:
        qkv = ctx.scratch((rows, n), "f32", "linear_rope_kv.qkv")
        made = LINEAR.encode(ctx, LinearParams(params.eps), (x, w, b, norm, None), (qkv,))
        made += ROPE_KV_APPEND.encode(ctx, params.rope, (qkv, *rest), (q,))
        ctx.chose(plan)
        return made
    ctx.chose(plan)
    kv = kernel(plan.variant)
    s = gemv.GemvShape(rows, n, k, w.dtype, swiglu=True)
    uniforms = {**gemv.core_uniforms(kv, s, bias=b, norm=norm, residual=None, eps=params.eps),
                **rope_kv.kernel_uniforms(params.rope, rows, rest)}
    bindings = {**gemv.core_bindings(ctx, x=x, w=w, bias=b, norm=norm), **rope_kv.kernel_bindings(ctx, rest, q)}
    return [ctx.dispatch(kv.name, uniforms=uniforms, bindings=bindings, workgroups=ctx.grid(gemv.workgroups(kv, s)),
                         label=OP, constants=gemv.walk_constants(kv, gemv.pass_rows(kv, s), norm=norm))]


# inputs 6 and 7 (the caches) are written in place besides the output q
LINEAR_ROPE_KV_APPEND = register(OpDef(OP, _infer, _encode, writes_inputs=(6, 7),
                                       inputs=("x", "w", "b?", "norm?", "cos", "sin", "cache[0]", "cache[1]",
                                               "page_table?", "pos?")))


def linear_rope_kv_append(x: TensorT, w: TensorT | QuantizedWeight, cos: TensorT, sin: TensorT,
                          cache: tuple[TensorT, TensorT], pos: int | TensorT, *, q_heads: int,
                          b: TensorT | None = None, norm: TensorT | None = None, eps: float = 1e-6,
                          layout: str = "contiguous", page_table: TensorT | None = None, page_size: int = 0,
                          pos_offset: int = 0, out: TensorT | None = None) -> TensorT:
    """`rope_kv_append(linear(x, w, b, norm=norm, eps=eps), cos, sin, cache, pos, q_heads=...)` as one op:
    returns q [rows, q_heads, D] f32 rotated; k (rotated) and v written into the caches in place. 1..8 rows of
    f32/f16 weights, 1 row of a QuantizedWeight, run ONE dispatch (the GEMV with RoPE and the append in its
    epilogue); other calls (more rows, in_features the GEMV's loads do not divide) run linear then
    rope_kv_append. Positions as rope_kv_append's.

    x: [rows, in] f32.
    w: the stacked [Wq; Wk; Wv] [(q_heads + 2 kv_heads) * D, in], f32 or f16 (or a QuantizedWeight).
    cos, sin: the RoPE tables [max_pos, D / 2] f32 (rope_tables).
    cache: (k_cache, v_cache) [L, kv_heads, D], f32 or f16, written in place.
    pos: the first row's position: an int or a u32 tensor with one value read at dispatch time.
    q_heads: how many of the output's heads are q heads (the rest split evenly into k and v).
    b: the stacked bias [(q_heads + 2 kv_heads) * D] f32, or None.
    norm: an RMSNorm weight [in] applied to x first, or None.
    eps: the fused RMSNorm's, a finite real > 0 (checked with or without norm; unused without it).
    layout: the cache's, as kv_append's: "contiguous", "ring" or "paged".
    page_table: "paged" only: a 1-D u32 tensor of page ids.
    page_size: "paged" only: rows per page.
    pos_offset: added to pos: the rows sit at pos + pos_offset + r.
    out: a tensor (in a graph: a state value) of q's shape and dtype to write into instead of a new one.
    """
    k_cache, v_cache = _pair(OP, "cache", cache)
    q_heads = args.integer(OP, "q_heads", q_heads, 1)
    eps = args.eps(OP, eps)
    write, pos_t = _write_params(OP, pos, layout, page_size, pos_offset, None, 0, 0, None)
    params = LinearRopeKVParams(q_heads, eps, write.pos, write.layout, write.page_size)
    if isinstance(w, QuantizedWeight):  # the quantized GEMV's op
        w = quant_weight(w, OP, "w")
        qparams = QuantLinearRopeKVParams(w.ggml_type, w.out_features, w.in_features, q_heads, eps, write.pos,
                                          write.layout, write.page_size)
        return apply(LINEAR_ROPE_KV_APPEND_Q, qparams,
                     (x, w.blocks, b, norm, cos, sin, k_cache, v_cache, page_table, pos_t), out=out)
    return apply(LINEAR_ROPE_KV_APPEND, params, (x, w, b, norm, cos, sin, k_cache, v_cache, page_table, pos_t),
                 out=out)
