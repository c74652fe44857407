"""Normalising ops over the last axis, one workgroup per row with f32 reductions: `softmax` (stable: the
row's max is subtracted; a row of -inf gives zeros) and `layernorm` (weight, optional bias, eps)."""

from __future__ import annotations

import math

import attrs

from wgraph.errors import DtypeError, LimitError, ShapeError
from wgraph.ops.attention_loops import CPU_LOOP_LIMIT  # lavapipe's cap on an invocation's loop iterations
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.kernels.registry import kernel, select_variant
from wgraph.tensor import TensorSpec


def row_loops(dim: int, threads: int, strides: int, reductions: int) -> int:
    """Loop iterations of one invocation of a row kernel: `strides` loops over the row (ceil(dim / threads)
    each) and `reductions` workgroup tree reductions (log2(threads)), each loop of n trips counted n + 1 as
    lavapipe counts them (wgraph/ops/attention_loops.py)."""
    return strides * (ceil_div(dim, threads) + 1) + reductions * (threads.bit_length() - 1 + 1)


def check_cpu_loops(ctx, op: str, dim: int, iterations: int) -> None:
    """LimitError where a CPU adapter would silently cut an invocation's loops short."""
    if ctx.caps.is_cpu and iterations > CPU_LOOP_LIMIT:
        raise LimitError(f"{op}: a row of {dim} values takes {iterations} loop iterations per invocation on "
                         f"{ctx.caps.adapter_name!r}, which stops an invocation's loops at {CPU_LOOP_LIMIT}")


def row_count(shape: tuple[int, ...]) -> int:
    """Rows of a [..., dim] tensor (a 0-d one is one row of one)."""
    return math.prod(shape[:-1]) if shape else 1


def check_rows(op: str, x: TensorSpec) -> None:
    if len(x.shape) < 1 or x.shape[-1] == 0:
        raise ShapeError(f"{op}: x must be [..., dim] with dim >= 1, got {x.shape}")


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
    check_cpu_loops(ctx, "softmax", x.shape[-1], row_loops(x.shape[-1], kernel(variant).threads, 3, 2))
    rows = row_count(x.shape)
    return [ctx.dispatch(variant, uniforms={"rows": rows, "dim": x.shape[-1]}, bindings={"x": x, "y": y},
                         workgroups=ctx.grid(rows), label="softmax")]


SOFTMAX = register(OpDef("softmax", _infer_softmax, _encode_softmax))


def softmax(x, *, out=None):
    """`exp(x - max) / sum(exp(x - max))` over the last axis (f32 or f16; f32 math). A row of -inf gives zeros."""
    return apply(SOFTMAX, SoftmaxParams(), (x,), out=out)


# ---- layernorm ----

@attrs.frozen
class LayerNormParams:
    eps: float = 1e-5


def _infer_layernorm(params: LayerNormParams, specs):
    x, w, b = specs
    check_rows("layernorm", x)
    if w is None:
        raise ShapeError("layernorm: weight is required (a bias is optional)")
    for name, t in (("weight", w), ("bias", b)):
        if t is None:
            continue
        if t.shape != x.shape[-1:]:
            raise ShapeError(f"layernorm: {name} must be ({x.shape[-1]},) for x {x.shape}, got {t.shape}")
        if t.dtype != x.dtype:
            raise DtypeError(f"layernorm: {name} dtype {t.dtype} differs from x's {x.dtype}")
    if not params.eps > 0:
        raise ShapeError(f"layernorm: eps must be > 0, got {params.eps}")
    select_variant("layernorm", output_dtype=x.dtype)
    return (TensorSpec(x.shape, x.dtype),)


def _encode_layernorm(ctx, params: LayerNormParams, inputs, outputs):
    (x, w, b), (y,) = inputs, outputs
    variant = select_variant("layernorm", output_dtype=x.dtype)
    check_cpu_loops(ctx, "layernorm", x.shape[-1], row_loops(x.shape[-1], kernel(variant).threads, 3, 2))
    rows = row_count(x.shape)
    return [ctx.dispatch(variant, uniforms={"rows": rows, "dim": x.shape[-1], "eps": params.eps,
                                            "has_bias": int(b is not None)},
                         bindings={"x": x, "weight": w, "bias": b if b is not None else ctx.fallback("layernorm.bias"),
                                   "y": y},
                         workgroups=ctx.grid(rows), label="layernorm")]


LAYERNORM = register(OpDef("layernorm", _infer_layernorm, _encode_layernorm))


def layernorm(x, weight, bias=None, *, eps: float = 1e-5, out=None):
    """`(x - mean) / sqrt(var + eps) * weight + bias` over the last axis (biased variance, as torch); f32 or f16
    with f32 reductions; bias optional."""
    return apply(LAYERNORM, LayerNormParams(float(eps)), (x, weight, bias), out=out)
