"""The bench's touch kernel (an op private to the bench): reads a tensor's bytes and keeps nothing, so that a
kernel after it finds them in the GPU's L2 (benchmarks/prefetch_probe.py asks whether that pays)."""

from __future__ import annotations

import attrs

import wgraph as wg
from wgraph.ops.core import OpDef, ceil_div, register
from wgraph.tensor import TensorSpec

# y is written only where a thread's xor of its words equals this (shaders/touch.wgsl): no data the probe uses
NEVER = 0x9E3779B9


@attrs.frozen
class TouchParams:
    """workgroups: how many (each 256 threads, grid-stride over x's 16-byte words): few enough to leave room for
    the kernel the touch runs beside."""
    workgroups: int = 264


def _infer_touch(params, specs):
    (x,) = specs
    if x.nbytes % 16:
        raise wg.ShapeError(f"bench_touch reads 16-byte words; {x.nbytes} bytes is not a multiple of 16")
    return (TensorSpec((4,), "u32"),)


def _encode_touch(ctx, params, inputs, outputs):
    (x,), (y,) = inputs, outputs
    count = x.nbytes // 16
    groups = max(1, min(params.workgroups, ceil_div(count, 256), ctx.caps.max_workgroups_per_dim))
    return [ctx.dispatch("bench_touch", uniforms={"count": count, "never": NEVER}, bindings={"x": x, "y": y},
                         workgroups=(groups, 1, 1), label="bench_touch")]


BENCH_TOUCH = register(OpDef("bench_touch", _infer_touch, _encode_touch))
