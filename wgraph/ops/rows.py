"""Row ops over the last axis, one workgroup per row with f32 reductions: `softmax` (stable: the row's max is
subtracted; a row of -inf gives zeros), and the row helpers the other row kernels share (sampling.py, norms.py):
row counts, shape checks, loop counts against a CPU adapter's cap."""

from __future__ import annotations

import math

import attrs

from wgraph.api_types import TensorT
from wgraph.errors import ShapeError
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.ops.cpu_limits import check_cpu_loops, halvings, loop
from wgraph.kernels.registry import kernel, select_variant
from wgraph.tensor import TensorSpec


def row_loops(dim: int, threads: int, strides: int, reductions: int) -> int:
    """Loop iterations of one invocation of a row kernel (counted as ops/cpu_limits.py counts them):
    `strides` loops over the row (ceil(dim / threads) each) and `reductions` workgroup tree reductions."""
    return strides * loop(ceil_div(dim, threads)) + reductions * loop(halvings(threads))


def check_row_loops(ctx, op: str, dim: int, iterations: int) -> None:
    """LimitError where a CPU adapter would silently cut a row kernel's loops short."""
    check_cpu_loops(ctx.caps, iterations, f"{op}: a row of {dim} values")


def row_count(shape: tuple[int, ...]) -> int:
    """Rows of a [..., dim] tensor (a 0-d one is one row of one)."""
    return math.prod(shape[:-1]) if shape else 1


def check_rows(op: str, x: TensorSpec, name: str = "x") -> None:
    """`x` (the argument `name`) is [..., dim] with dim >= 1."""
    if len(x.shape) < 1 or x.shape[-1] == 0:
        raise ShapeError(f"{op}: {name} must be [..., dim] with dim >= 1, got {x.shape}")


# ---- softmax ----

@attrs.frozen
class SoftmaxParams:
    pass


def _infer_softmax(params, specs):
    (x,) = specs
    check_rows("softmax", x)
    select_variant("softmax", output_dtype=x.dtype)
    return (TensorSpec(x.shape, x.dtype),)


def _encode_softmax(ctx, params, inputs, outputs):
    (x,), (y,) = inputs, outputs
    variant = select_variant("softmax", output_dtype=x.dtype)
    check_row_loops(ctx, "softmax", x.shape[-1], row_loops(x.shape[-1], kernel(variant).threads, 3, 2))
    rows = row_count(x.shape)
    return [ctx.dispatch(variant, uniforms={"rows": rows, "dim": x.shape[-1]}, bindings={"x": x, "y": y},
                         workgroups=ctx.grid(rows), label="softmax")]


SOFTMAX = register(OpDef("softmax", _infer_softmax, _encode_softmax, inputs=("x",)))


def softmax(x: TensorT, *, out: TensorT | None = None) -> TensorT:
    """`exp(x - max) / sum(exp(x - max))` over the last axis (f32 or f16; f32 math). A row of -inf gives zeros.

    x: [..., V].
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    return apply(SOFTMAX, SoftmaxParams(), (x,), out=out)
