"""The bench's copy kernel (an op private to the bench): the bandwidth ceiling every memory-bound row is a
fraction of, and the steady work that brings an idle GPU's clocks up before timing."""

from __future__ import annotations

import attrs

import wgraph as wg
from wgraph.ops.core import OpDef, ceil_div, register
from wgraph.tensor import TensorSpec


@attrs.frozen
class CopyParams:
    pass


def _infer_copy(params, specs):
    (x,) = specs
    if x.nbytes % 16:
        raise wg.ShapeError(f"bench_copy copies 16-byte words; {x.nbytes} bytes is not a multiple of 16")
    return (TensorSpec(x.shape, x.dtype),)


def _encode_copy(ctx, params, inputs, outputs):
    (x,), (y,) = inputs, outputs
    count = x.nbytes // 16
    groups = min(ceil_div(count, 256), ctx.caps.max_workgroups_per_dim)
    return [ctx.dispatch("bench_copy", uniforms={"count": count}, bindings={"x": x, "y": y},
                         workgroups=(max(1, groups), 1, 1), label="bench_copy")]


BENCH_COPY = register(OpDef("bench_copy", _infer_copy, _encode_copy))
