"""`add_rmsnorm`: a decoder's residual add and the RMSNorm that follows it, in one dispatch (two outputs: the
new residual stream and its normalised copy). Saves a dispatch and a pass over the row per norm."""

from __future__ import annotations

import attrs

from wgraph.errors import DtypeError, ShapeError
from wgraph.ops.core import OpDef, apply, register
from wgraph.kernels.registry import select_variant
from wgraph.tensor import TensorSpec


@attrs.frozen
class AddRmsNormParams:
    eps: float = 1e-6


def _infer(params: AddRmsNormParams, specs):
    x, r, w = specs
    if len(x.shape) < 1 or r.shape != x.shape or w.shape != x.shape[-1:]:
        dim = x.shape[-1] if x.shape else "?"
        raise ShapeError(f"add_rmsnorm: x and residual must have one shape and weight be ({dim},); "
                         f"got x {x.shape}, residual {r.shape}, weight {w.shape}")
    if not x.dtype == r.dtype == w.dtype:
        raise DtypeError(f"add_rmsnorm: x, residual and weight must share a dtype, got {x.dtype}, {r.dtype}, {w.dtype}")
    if not params.eps > 0:
        raise ShapeError(f"add_rmsnorm: eps must be > 0, got {params.eps}")
    select_variant("add_rmsnorm", output_dtype=x.dtype)
    return (TensorSpec(x.shape, x.dtype), TensorSpec(x.shape, x.dtype))


def _encode(ctx, params: AddRmsNormParams, inputs, outputs):
    (x, r, w), (s, y) = inputs, outputs
    variant = select_variant("add_rmsnorm", output_dtype=x.dtype)
    dim = x.shape[-1]
    rows = x.size // dim if dim else 0
    return [ctx.dispatch(variant, uniforms={"rows": rows, "dim": dim, "eps": params.eps},
                         bindings={"x": x, "r": r, "weight": w, "sum": s, "y": y}, workgroups=ctx.grid(rows),
                         label="add_rmsnorm")]


ADD_RMSNORM = register(OpDef("add_rmsnorm", _infer, _encode))


def add_rmsnorm(x, residual, weight, *, eps: float = 1e-6, out=None):
    """(s, rmsnorm(s, weight)) with s = x + residual, over the last axis (f32 or f16; f32 reduction)."""
    return apply(ADD_RMSNORM, AddRmsNormParams(float(eps)), (x, residual, weight), out=out)
