"""`cast`: a float tensor converted to another float dtype (f16 <-> f32), elementwise."""

from __future__ import annotations

import attrs

from wgraph.errors import DtypeError
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.scheduler.registry import kernel, select_variant
from wgraph.tensor import TensorSpec


@attrs.frozen
class CastParams:
    dtype: str


def _infer(params: CastParams, specs):
    (x,) = specs
    if x.dtype == params.dtype:
        raise DtypeError(f"cast: x is already {x.dtype}")
    select_variant("cast", src_dtype=x.dtype, output_dtype=params.dtype)
    return (TensorSpec(x.shape, params.dtype),)


def _encode(ctx, params: CastParams, inputs, outputs):
    (x,), (y,) = inputs, outputs
    variant = select_variant("cast", src_dtype=x.dtype, output_dtype=params.dtype)
    return [ctx.dispatch(variant, uniforms={"n": x.size}, bindings={"x": x, "y": y},
                         workgroups=ctx.grid(ceil_div(x.size, kernel(variant).threads)), label="cast")]


CAST = register(OpDef("cast", _infer, _encode))


def cast(x, dtype: str, *, out=None):
    """x as `dtype` ("f32" or "f16"; from the other one): f16 -> f32 is exact, f32 -> f16 rounds to nearest."""
    return apply(CAST, CastParams(str(dtype)), (x,), out=out)
