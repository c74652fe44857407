"""`linear_rope_kv_append` on a QuantizedWeight (GGML blocks): the quantized GEMV of the stacked [Wq; Wk; Wv]
(norm and bias fused) with RoPE of q and k and the KV-cache append of k and v in its epilogue, ONE dispatch for
the row of x decode has (wgraph/shaders/quant_gemv_rope_kv.wgsl, planned from registry/quant_rope_kv.toml). A
call no fused variant takes (more rows: prefill; a format or cache dtype without a kernel) runs `linear_q` then
`rope_kv_append`, the same math, and its plan says why."""

from __future__ import annotations

import functools

import attrs

from wgraph import args
from wgraph.errors import ShapeError, WgraphError
from wgraph.kernels.registry import kernel, kernels_for
from wgraph.ops import rope_kv
from wgraph.ops.core import OpDef, adapter_refusal, register
from wgraph.ops.gemv import device_refusal, walk_constants
from wgraph.ops.quantized import (LINEAR_Q, QuantLinearParams, _infer_linear_q, core_bindings, core_uniforms,
                                  cpu_loop_refusal, describe_gemv, plan_linear_q)
from wgraph.ops.rope_kv import ROPE_KV_APPEND, RopeKVParams, check_rope_kv

OP = "linear_rope_kv_append_q"


@attrs.frozen
class LinearRopeKVPlan:
    """How a linear_rope_kv_append call runs (this op's and linear_rope_kv.py's): `fused`, the GEMV kernel
    `variant` with RoPE and the append in its epilogue (one dispatch); else the linear plan's kernel (`variant`)
    and then rope_kv_append."""

    variant: str
    reason: str
    fused: bool


@attrs.frozen
class QuantLinearRopeKVParams:
    """linear_rope_kv_append's options (as LinearRopeKVParams) and the weight's format and logical shape [out, in]
    (its blocks are the op's second input)."""

    ggml_type: str
    out_features: int
    in_features: int
    q_heads: int
    eps: float = 1e-6
    pos: int = 0  # position of row 0 (plus pos_buf[0] on the GPU when a position tensor is given)
    layout: str = "contiguous"
    page_size: int = 0

    @property
    def rope(self) -> RopeKVParams:
        return RopeKVParams(self.q_heads, self.pos, self.layout, self.page_size)

    @property
    def linear(self) -> QuantLinearParams:
        return QuantLinearParams(self.ggml_type, self.out_features, self.in_features, self.eps)


def _refusal(kv, rows: int, n: int, k: int, caps) -> str | None:
    """Why fused variant `kv` cannot take the call (None: it can); caps None: any device (planned as for a GPU)."""
    no = device_refusal(kv, caps)
    if no:
        return no
    no = adapter_refusal(kv, caps)
    if no:
        return no
    lim = kv.limits
    if rows > lim["max_rows"]:
        return f"takes at most {lim['max_rows']} rows"
    ft = lim["features_per_lane"]
    if ft % 2 or n % ft:  # a slot's rows are RoPE pairs (f, f + FT / 2)
        return f"needs an even features_per_lane that divides {n} (RoPE's pairs), it has {ft}"
    return cpu_loop_refusal(kv, k, caps)  # the core's walk along a row, as linear_q's


@functools.lru_cache(maxsize=256)  # a pure function of the shape, the format, the caps and the registry
def plan_linear_rope_kv_q(rows: int, n: int, k: int, ggml_type: str, cache_dtype: str, caps, *,
                          norm: bool = False, bias: bool = False) -> LinearRopeKVPlan:
    """The first variant of registry/quant_rope_kv.toml for the format and cache dtype that takes the call, else
    linear_q's plan followed by rope_kv_append (the reason says which and why)."""
    kernels = [kv for kv in kernels_for(OP)
               if kv.facts.get("ggml_type") == ggml_type and kv.facts.get("cache_dtype") == cache_dtype]
    fused = tuple(name for name, on in (("rmsnorm", norm), ("bias", bias)) if on)
    why: dict[str, list[str]] = {}
    if not kernels:
        why[f"no fused kernel for {ggml_type} weights and {cache_dtype} caches"] = []
    elif rows < 1:
        why[f"{rows} rows"] = []
        kernels = []
    for kv in kernels:
        no = _refusal(kv, rows, n, k, caps)
        if no is None:
            return LinearRopeKVPlan(
                kv.name, f"{rows} rows <= {kv.limits['max_rows']}: {ggml_type} GEMV (blocks dequantized in "
                         f"registers), {describe_gemv(kv, n, True)}, W's rows in RoPE pair order"
                         + "".join(f", {name} fused" for name in fused)
                         + "; RoPE and the K/V append in its epilogue", True)
        why.setdefault(no, []).append(kv.name)
    lin = plan_linear_q(rows, n, k, ggml_type, fused=fused, caps=caps)
    no = "; ".join(f"{', '.join(names)} {no}" if names else no for no, names in why.items())
    return LinearRopeKVPlan(lin.variant, f"not fused ({no}): linear ({lin.reason}), then rope_kv_append", False)


def _infer(params: QuantLinearRopeKVParams, specs):
    x, blocks, b, norm, cos_t, sin_t, k_cache, v_cache, table, pos_t = specs
    q_heads = args.integer("linear_rope_kv_append", "q_heads", params.q_heads, 1)  # a graph file's too
    if len(x.shape) != 2:
        raise ShapeError(f"linear_rope_kv_append: x must be [rows, in], got {x.shape}")
    try:
        (qkv,) = _infer_linear_q(params.linear, (x, blocks, b, norm, None))
    except WgraphError as e:  # linear's checks, named as this op's
        raise type(e)(f"linear_rope_kv_append: {e}") from None
    if len(k_cache.shape) == 3:
        hkv, d = k_cache.shape[1:]
        want = (q_heads + 2 * hkv) * d
        if params.out_features != want:
            raise ShapeError(f"linear_rope_kv_append: w must be [(q_heads + 2 kv_heads) * head_dim, in] = "
                             f"[{want}, in] for {q_heads} q heads and caches {k_cache.shape}, got a "
                             f"{params.ggml_type} [{params.out_features}, {params.in_features}] weight")
    return (check_rope_kv("linear_rope_kv_append", params.rope,
                          (qkv, cos_t, sin_t, k_cache, v_cache, table, pos_t)),)


def _encode(ctx, params: QuantLinearRopeKVParams, inputs, outputs):
    (x, blocks, b, norm, *rest), (q,) = inputs, outputs
    rows, k = x.shape
    n = params.out_features
    plan = plan_linear_rope_kv_q(rows, n, k, params.ggml_type, rest[2].dtype, ctx.caps, norm=norm is not None,
                                 bias=b is not None)
    if not plan.fused:
        qkv = ctx.scratch((rows, n), "f32", "linear_rope_kv.qkv")
        made = LINEAR_Q.encode(ctx, params.linear, (x, blocks, b, norm, None), (qkv,))
        made += ROPE_KV_APPEND.encode(ctx, params.rope, (qkv, *rest), (q,))
        ctx.chose(plan)
        return made
    ctx.chose(plan)
    kv = kernel(plan.variant)
    # the core's fields as swiglu's (a slot's rows are pairs: n / FT slots), the epilogue told apart by the kernel
    uniforms = {**core_uniforms(kv, rows, n, k, True, bias=b, norm=norm, residual=None, eps=params.eps),
                "out_n": n, "swiglu": 0, **rope_kv.kernel_uniforms(params.rope, rows, rest)}
    bindings = {**core_bindings(ctx, x=x, blocks=blocks, bias=b, norm=norm), **rope_kv.kernel_bindings(ctx, rest, q)}
    return [ctx.dispatch(kv.name, uniforms=uniforms, bindings=bindings,
                         workgroups=ctx.grid(uniforms["groups_per_chunk"]), label="linear_rope_kv_append",
                         constants=walk_constants(kv, rows, norm=norm))]


# inputs 6 and 7 (the caches) are written in place besides the output q
LINEAR_ROPE_KV_APPEND_Q = register(OpDef(OP, _infer, _encode, writes_inputs=(6, 7),
                                         inputs=("x", "w.blocks", "b?", "norm?", "cos", "sin", "cache[0]",
                                                 "cache[1]", "page_table?", "pos?")))
