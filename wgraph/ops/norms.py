"""The normalisations over the last axis, one workgroup per row with f32 reductions: `rmsnorm`, `layernorm`
(weight, optional bias), and `add_rmsnorm` (a decoder's residual add and the RMSNorm that follows it in one
dispatch: two outputs, the new residual stream and its normalised copy; saves a dispatch and a pass over the
row per norm)."""

from __future__ import annotations

import attrs

from wgraph import args
from wgraph.api_types import TensorT
from wgraph.errors import DtypeError, ShapeError
from wgraph.kernels.registry import kernel, select_variant
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.ops.cpu_limits import loop
from wgraph.ops.rows import check_row_loops, check_rows, row_count, row_loops
from wgraph.tensor import TensorSpec


# ---- rmsnorm ----

@attrs.frozen
class RmsNormParams:
    eps: float = 1e-6


def _check_affine(op: str, x: TensorSpec, eps: float, **tensors) -> None:
    """ShapeError / DtypeError unless every given tensor (weight, bias) is x's last axis in x's dtype;
    ArgumentError unless eps is a finite real > 0 (a Program.update's params come here unchecked)."""
    for name, t in tensors.items():
        if t is None:
            continue
        if t.shape != x.shape[-1:]:   # x is [..., dim >= 1]: check_rows first
            raise ShapeError(f"{op}: {name} must be ({x.shape[-1]},) for x {x.shape}, got {t.shape}")
        if t.dtype != x.dtype:
            raise DtypeError(f"{op}: {name} dtype {t.dtype} differs from x's {x.dtype}")
    args.eps(op, eps)


def _infer_rmsnorm(params: RmsNormParams, specs):
    x, w = specs
    check_rows("rmsnorm", x)   # a 0-d x was blamed on the weight; an empty row has no mean square
    _check_affine("rmsnorm", x, params.eps, weight=w)
    if x.dtype == "bf16" and x.shape[-1] % 2:
        raise ShapeError(f"rmsnorm: a bf16 row is written as u32 words of two elements, so its length must be even; "
                         f"got x {x.shape}")
    select_variant("rmsnorm", output_dtype=x.dtype)
    return (TensorSpec(x.shape, x.dtype),)


def _encode_rmsnorm(ctx, params: RmsNormParams, inputs, outputs):
    (x, w), (y,) = inputs, outputs
    variant = select_variant("rmsnorm", output_dtype=x.dtype)
    dim = x.shape[-1]
    threads = kernel(variant).threads
    # the sum of squares over the row's elements, then the writes (over u32 words of two for bf16)
    writes = ceil_div(dim, 2 * threads) if x.dtype == "bf16" else ceil_div(dim, threads)
    check_row_loops(ctx, "rmsnorm", dim, row_loops(dim, threads, 1, 1) + loop(writes))
    rows = row_count(x.shape)
    return [ctx.dispatch(variant, uniforms={"rows": rows, "dim": dim, "eps": params.eps},
                         bindings={"x": x, "weight": w, "y": y}, workgroups=ctx.grid(rows), label="rmsnorm")]


RMSNORM = register(OpDef("rmsnorm", _infer_rmsnorm, _encode_rmsnorm, inputs=("x", "weight")))


def rmsnorm(x: TensorT, weight: TensorT, *, eps: float = 1e-6, out: TensorT | None = None) -> TensorT:
    """`x / sqrt(mean(x**2, -1) + eps) * weight` over the last axis (f32, f16 or bf16 with an even last dim; f32
    reduction). x [..., D] with weight [D]: a per-head norm of [rows, heads, head_dim] takes weight [head_dim].
    A row whose f32 sum of squares overflows (|x| past ~1.8e19 / sqrt(D)) comes out as zeros, as torch's f32
    RMSNorm gives (docs/errors.md, `norm-square-overflow`).

    x: [..., D], D >= 1.
    weight: [D], x's dtype.
    eps: added to the mean square, a finite real > 0.
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    return apply(RMSNORM, RmsNormParams(args.eps("rmsnorm", eps)), (x, weight), out=out)


# ---- layernorm ----

@attrs.frozen
class LayerNormParams:
    eps: float = 1e-5


def _infer_layernorm(params: LayerNormParams, specs):
    x, w, b = specs
    check_rows("layernorm", x)
    if w is None:
        raise ShapeError("layernorm: weight is required (a bias is optional)")
    _check_affine("layernorm", x, params.eps, weight=w, bias=b)
    select_variant("layernorm", output_dtype=x.dtype)
    return (TensorSpec(x.shape, x.dtype),)


def _encode_layernorm(ctx, params: LayerNormParams, inputs, outputs):
    (x, w, b), (y,) = inputs, outputs
    variant = select_variant("layernorm", output_dtype=x.dtype)
    check_row_loops(ctx, "layernorm", x.shape[-1], row_loops(x.shape[-1], kernel(variant).threads, 3, 2))
    rows = row_count(x.shape)
    return [ctx.dispatch(variant, uniforms={"rows": rows, "dim": x.shape[-1], "eps": params.eps,
                                            "has_bias": int(b is not None)},
                         bindings={"x": x, "weight": w, "bias": b if b is not None else ctx.fallback("layernorm.bias"),
                                   "y": y},
                         workgroups=ctx.grid(rows), label="layernorm")]


LAYERNORM = register(OpDef("layernorm", _infer_layernorm, _encode_layernorm, inputs=("x", "weight", "bias?")))


def layernorm(x: TensorT, weight: TensorT, bias: TensorT | None = None, *, eps: float = 1e-5,
              out: TensorT | None = None) -> TensorT:
    """`(x - mean) / sqrt(var + eps) * weight + bias` over the last axis (biased variance, as torch); f32 or f16
    with f32 reductions; bias optional. A row whose f32 variance overflows comes out as zeros plus bias
    (docs/errors.md, `norm-square-overflow`).

    x: [..., D], D >= 1.
    weight: [D], x's dtype.
    bias: [D], x's dtype, or None (no bias).
    eps: added to the variance, a finite real > 0.
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    return apply(LAYERNORM, LayerNormParams(args.eps("layernorm", eps)), (x, weight, bias), out=out)


# ---- add_rmsnorm ----

@attrs.frozen
class AddRmsNormParams:
    eps: float = 1e-6


def _infer_add_rmsnorm(params: AddRmsNormParams, specs):
    x, r, w = specs
    check_rows("add_rmsnorm", x)
    if r.shape != x.shape or w.shape != x.shape[-1:]:
        raise ShapeError(f"add_rmsnorm: x and residual must have one shape and weight be ({x.shape[-1]},); "
                         f"got x {x.shape}, residual {r.shape}, weight {w.shape}")
    if not x.dtype == r.dtype == w.dtype:
        raise DtypeError(f"add_rmsnorm: x, residual and weight must share a dtype, got {x.dtype}, {r.dtype}, {w.dtype}")
    args.eps("add_rmsnorm", params.eps)
    select_variant("add_rmsnorm", output_dtype=x.dtype)
    return (TensorSpec(x.shape, x.dtype), TensorSpec(x.shape, x.dtype))


def _encode_add_rmsnorm(ctx, params: AddRmsNormParams, inputs, outputs):
    (x, r, w), (s, y) = inputs, outputs
    variant = select_variant("add_rmsnorm", output_dtype=x.dtype)
    dim = x.shape[-1]
    check_row_loops(ctx, "add_rmsnorm", dim, row_loops(dim, kernel(variant).threads, 2, 1))
    rows = row_count(x.shape)
    return [ctx.dispatch(variant, uniforms={"rows": rows, "dim": dim, "eps": params.eps},
                         bindings={"x": x, "r": r, "weight": w, "sum": s, "y": y}, workgroups=ctx.grid(rows),
                         label="add_rmsnorm")]


ADD_RMSNORM = register(OpDef("add_rmsnorm", _infer_add_rmsnorm, _encode_add_rmsnorm, inputs=("x", "residual", "weight")))


def add_rmsnorm(x: TensorT, residual: TensorT, weight: TensorT, *, eps: float = 1e-6,
                out: tuple[TensorT, TensorT] | None = None) -> tuple[TensorT, TensorT]:
    """(s, rmsnorm(s, weight)) with s = x + residual, over the last axis (f32 or f16; f32 reduction); a row of s
    whose f32 sum of squares overflows normalises to zeros (rmsnorm).

    x: [..., D], D >= 1.
    residual: x's shape and dtype.
    weight: [D], x's dtype.
    eps: added to the mean square, a finite real > 0.
    out: (sum, normed) tensors to write into instead of new ones.
    """
    return apply(ADD_RMSNORM, AddRmsNormParams(args.eps("add_rmsnorm", eps)), (x, residual, weight), out=out)
