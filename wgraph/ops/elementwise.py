"""Elementwise ops: `scale` and `add`. Small, but they take every path an op can take (immediate,
recorded, graph, indirect dispatch), so the engine's tests use them."""

from __future__ import annotations

import attrs

from wgraph.dtypes import F32_MAX
from wgraph.errors import DtypeError, LimitError, ShapeError
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.scheduler.registry import kernel, select_variant
from wgraph.tensor import Tensor, TensorSpec


def _direct_or_indirect(ctx, variant: str, n: int, indirect: Tensor | None) -> dict:
    if indirect is not None:
        return {"indirect": (indirect, 0)}
    return {"workgroups": ctx.grid(ceil_div(n, kernel(variant).threads))}


def _check_indirect(specs):
    if specs is not None and (specs.dtype != "u32" or specs.size < 3):
        raise ShapeError(f"indirect args must be a u32 tensor of at least 3 values (x, y, z), got {specs}")


@attrs.frozen
class ScaleParams:
    factor: float


def _infer_scale(params: ScaleParams, specs):
    x, indirect = specs
    if abs(params.factor) > F32_MAX:
        raise LimitError(f"scale: factor {params.factor} is outside f32's range +-{F32_MAX:.8g}")
    select_variant("scale", output_dtype=x.dtype)
    _check_indirect(indirect)
    return (TensorSpec(x.shape, x.dtype),)


def _encode_scale(ctx, params: ScaleParams, inputs, outputs):
    (x, indirect), (y,) = inputs, outputs
    variant = select_variant("scale", output_dtype=x.dtype)
    return [ctx.dispatch(variant, uniforms={"n": x.size, "factor": params.factor}, bindings={"x": x, "y": y},
                         label="scale", **_direct_or_indirect(ctx, variant, x.size, indirect))]


SCALE = register(OpDef("scale", _infer_scale, _encode_scale))


def scale(x, factor: float, *, indirect=None, out=None):
    """`x * factor`. `indirect=` a u32 tensor [x, y, z] of workgroup counts read by the GPU at dispatch time."""
    return apply(SCALE, ScaleParams(float(factor)), (x, indirect), out=out)


@attrs.frozen
class AddParams:
    pass


def _infer_add(params, specs):
    a, b, indirect = specs
    if a.shape != b.shape:
        raise ShapeError(f"add: shapes {a.shape} and {b.shape} differ (no broadcasting)")
    if a.dtype != b.dtype:
        raise DtypeError(f"add: dtypes {a.dtype} and {b.dtype} differ")
    select_variant("add", output_dtype=a.dtype)
    _check_indirect(indirect)
    return (TensorSpec(a.shape, a.dtype),)


def _encode_add(ctx, params, inputs, outputs):
    (a, b, indirect), (c,) = inputs, outputs
    variant = select_variant("add", output_dtype=a.dtype)
    return [ctx.dispatch(variant, uniforms={"n": a.size}, bindings={"a": a, "b": b, "c": c}, label="add",
                         **_direct_or_indirect(ctx, variant, a.size, indirect))]


ADD = register(OpDef("add", _infer_add, _encode_add))


def add(a, b, *, indirect=None, out=None):
    """`a + b` for tensors of one shape and dtype."""
    return apply(ADD, AddParams(), (a, b, indirect), out=out)
