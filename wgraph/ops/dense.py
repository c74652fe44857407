"""The dense ops a layer graph needs: `linear` (x @ W^T + b), `rmsnorm`, `rope` (rotate-half, from tables)
and `reshape` (a view: no copy, no dispatch; in a graph a view node that aliases its input's buffer)."""

from __future__ import annotations

import functools
import math

import attrs
import numpy as np

from wgraph.dtypes import is_int
from wgraph.errors import DtypeError, LimitError, PlanError, ShapeError
from wgraph.ggml_blocks import QuantizedWeight
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.ops.quantized import linear_q
from wgraph.kernels.registry import kernel, kernels_for, select_variant
from wgraph.tensor import Tensor, TensorSpec


# ---- linear ----

@attrs.frozen
class LinearParams:
    pass


def _infer_linear(params: LinearParams, specs):
    x, w, b = specs
    if len(x.shape) < 1 or len(w.shape) != 2:
        raise ShapeError(f"linear: x must be [..., in] and W [out, in], got x {x.shape} and W {w.shape}")
    n, k = w.shape
    if x.shape[-1] != k:
        raise ShapeError(f"linear: x has {x.shape[-1]} input features (shape {x.shape}), W {w.shape} takes {k}")
    if x.dtype != "f32":
        raise DtypeError(f"linear: x must be f32 (weights may be f32 or f16), got {x.dtype}")
    if b is not None:
        if b.shape != (n,):
            raise ShapeError(f"linear: bias must be ({n},) for W {w.shape}, got {b.shape}")
        if b.dtype != "f32":
            raise DtypeError(f"linear: bias must be f32, got {b.dtype}")
    select_variant("linear", weight_dtype=w.dtype)
    return (TensorSpec(x.shape[:-1] + (n,), "f32"),)


@attrs.frozen
class LinearPlan:
    """The kernel `linear` runs for one shape, and why."""

    variant: str
    reason: str


@functools.lru_cache(maxsize=1024)  # a pure function of the shape and the registry: planned on every call
def plan_linear(rows: int, n: int, k: int, weight_dtype: str) -> LinearPlan:
    """GEMV (of the variants whose `max_rows` holds `rows` and whose `min_k` k reaches: the fewest max_rows,
    then the largest min_k) when k fills its 16-byte weight loads, else the tiled GEMM; the numbers come from
    the registry."""
    tiled = select_variant("linear", weight_dtype=weight_dtype)
    gemvs = [kv for kv in kernels_for("linear")
             if kv.facts.get("form") == "gemv" and kv.facts.get("weight_dtype") == weight_dtype]
    fits = sorted((kv for kv in gemvs if rows <= kv.limits["max_rows"] and k >= kv.facts.get("min_k", 0)),
                  key=lambda kv: (kv.limits["max_rows"], -kv.facts.get("min_k", 0)))
    if not gemvs or rows < 1:
        return LinearPlan(tiled, f"{rows} rows: tiled GEMM")
    if not fits:
        most = max(kv.limits["max_rows"] for kv in gemvs)
        return LinearPlan(tiled, f"{rows} rows > {most} (GEMV's most): tiled GEMM")
    g = fits[0]
    if k % g.limits["k_multiple"]:
        return LinearPlan(tiled, f"{rows} rows but in_features {k} is not a multiple of {g.limits['k_multiple']} "
                                 f"({weight_dtype} weights per 16-byte load): tiled GEMM")
    lanes = g.threads // g.limits["features_per_workgroup"]
    return LinearPlan(g.name, f"{rows} rows <= {g.limits['max_rows']}: GEMV, one pass over W, {lanes} lanes per "
                              f"weight row (in_features {k}), {g.limits['k_multiple']} {weight_dtype} weights per "
                              f"16-byte load")


def linear_plan(specs) -> LinearPlan:
    """The plan for input specs (x, w, bias)."""
    x, w, _ = specs
    n, k = w.shape
    return plan_linear(x.size // k if k else 0, n, k, w.dtype)


def _encode_linear(ctx, params, inputs, outputs):
    (x, w, b), (y,) = inputs, outputs
    plan = linear_plan((x.spec, w.spec, None))
    ctx.chose(plan)
    variant = plan.variant
    n, k = w.shape
    m = x.size // k if k else 0
    uniforms = {"m": m, "n": n, "k": k, "has_bias": int(b is not None)}
    bindings = {"x": x, "w": w, "bias": b if b is not None else ctx.fallback("linear.bias"), "y": y}
    kv = kernel(variant)
    if kv.facts.get("form") == "gemv":
        groups = ctx.grid(ceil_div(n, kv.limits["features_per_workgroup"]))
    else:
        groups = (ceil_div(n, kv.workgroup_size[0]), ceil_div(m, kv.workgroup_size[1]), 1)
    return [ctx.dispatch(variant, uniforms=uniforms, bindings=bindings, workgroups=groups, label="linear")]


LINEAR = register(OpDef("linear", _infer_linear, _encode_linear))


def linear(x, w, b=None, *, out=None):
    """`x @ W.T + b`: x f32 [..., in], W [out, in] f32 or f16 (or a QuantizedWeight: `linear_q`), b f32 [out] or
    None; f32 accumulation and output."""
    if isinstance(w, QuantizedWeight):
        return linear_q(x, w, b, out=out)
    return apply(LINEAR, LinearParams(), (x, w, b), out=out)


# ---- rmsnorm ----

@attrs.frozen
class RmsNormParams:
    eps: float = 1e-6


def _infer_rmsnorm(params: RmsNormParams, specs):
    x, w = specs
    if len(x.shape) < 1 or w.shape != x.shape[-1:]:
        raise ShapeError(f"rmsnorm: weight must be ({x.shape[-1] if x.shape else '?'},) for x {x.shape}, got {w.shape}")
    if w.dtype != x.dtype:
        raise DtypeError(f"rmsnorm: weight dtype {w.dtype} differs from x's {x.dtype}")
    if not params.eps > 0:
        raise ShapeError(f"rmsnorm: eps must be > 0, got {params.eps}")
    select_variant("rmsnorm", output_dtype=x.dtype)
    return (TensorSpec(x.shape, x.dtype),)


def _encode_rmsnorm(ctx, params: RmsNormParams, inputs, outputs):
    (x, w), (y,) = inputs, outputs
    variant = select_variant("rmsnorm", output_dtype=x.dtype)
    dim = x.shape[-1]
    rows = x.size // dim if dim else 0
    return [ctx.dispatch(variant, uniforms={"rows": rows, "dim": dim, "eps": params.eps},
                         bindings={"x": x, "weight": w, "y": y}, workgroups=ctx.grid(rows), label="rmsnorm")]


RMSNORM = register(OpDef("rmsnorm", _infer_rmsnorm, _encode_rmsnorm))


def rmsnorm(x, weight, *, eps: float = 1e-6, out=None):
    """`x / sqrt(mean(x**2, -1) + eps) * weight` over the last axis (f32 or f16; f32 reduction)."""
    return apply(RMSNORM, RmsNormParams(float(eps)), (x, weight), out=out)


# ---- rope ----

@attrs.frozen
class RopeParams:
    pos: int = 0  # position of row 0 (plus pos_buf[0] on the GPU when a position tensor is given)


def _infer_rope(params: RopeParams, specs):
    x, cos_t, sin_t, pos_t = specs
    if len(x.shape) != 3 or x.shape[2] % 2:
        raise ShapeError(f"rope: x must be [rows, heads, head_dim] with an even head_dim, got {x.shape}")
    half = x.shape[2] // 2
    for name, t in (("cos", cos_t), ("sin", sin_t)):
        if len(t.shape) != 2 or t.shape[1] != half:
            raise ShapeError(f"rope: {name} table must be [max_pos, {half}] for head_dim {x.shape[2]}, got {t.shape}")
        if t.dtype != x.dtype:
            raise DtypeError(f"rope: {name} table dtype {t.dtype} differs from x's {x.dtype}")
    if cos_t.shape != sin_t.shape:
        raise ShapeError(f"rope: cos {cos_t.shape} and sin {sin_t.shape} tables differ")
    if params.pos < 0:
        raise LimitError(f"rope: position {params.pos} is negative")
    # With a GPU position these are the least positions the rows can have (the kernel relies on it).
    if x.shape[0] and params.pos + x.shape[0] > cos_t.shape[0]:
        raise LimitError(f"rope: positions {params.pos}..{params.pos + x.shape[0] - 1} exceed the table's "
                         f"{cos_t.shape[0]} rows")
    if pos_t is not None and (pos_t.dtype != "u32" or pos_t.size < 1):
        raise ShapeError(f"rope: a GPU position must be a u32 tensor with at least one value, got {pos_t.shape} {pos_t.dtype}")
    select_variant("rope", output_dtype=x.dtype)
    return (TensorSpec(x.shape, x.dtype),)


def _encode_rope(ctx, params: RopeParams, inputs, outputs):
    (x, cos_t, sin_t, pos_t), (y,) = inputs, outputs
    variant = select_variant("rope", output_dtype=x.dtype)
    rows, heads, dim = x.shape
    total = rows * heads * (dim // 2)
    return [ctx.dispatch(variant, uniforms={"rows": rows, "heads": heads, "half": dim // 2, "pos": params.pos,
                                            "use_pos_buf": int(pos_t is not None), "table_rows": cos_t.shape[0]},
                         bindings={"x": x, "cos_t": cos_t, "sin_t": sin_t,
                                   "pos_buf": pos_t if pos_t is not None else ctx.fallback("rope.pos"), "y": y},
                         workgroups=ctx.grid(ceil_div(total, kernel(variant).threads)), label="rope")]


ROPE = register(OpDef("rope", _infer_rope, _encode_rope))


def rope(x, cos, sin, *, pos=0, pos_offset: int = 0, out=None):
    """Rotate-half RoPE of x [rows, heads, head_dim] with tables [max_pos, head_dim / 2]; row r sits at
    position `pos + r`. `pos` is an int (checked against the table) or a u32 GPU tensor (plus `pos_offset`),
    read at dispatch time; rows a GPU position puts beyond the table come out as zeros and are reported on
    the device error flag (GpuValueError from dev.check_errors() or the next readback)."""
    if isinstance(pos, Tensor) or getattr(pos, "_wgraph_symbol_", False):
        return apply(ROPE, RopeParams(int(pos_offset)), (x, cos, sin, pos), out=out)
    if not is_int(pos):
        raise ShapeError(f"rope: pos must be an int or a u32 GPU tensor, got {type(pos).__name__}")
    return apply(ROPE, RopeParams(int(pos) + int(pos_offset)), (x, cos, sin, None), out=out)


def rope_tables(max_pos: int, head_dim: int, base: float = 10000.0, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin tables [max_pos, head_dim / 2] with frequencies base ** (-2i / head_dim)."""
    inv = base ** (-np.arange(0, head_dim // 2, dtype=np.float64) * 2.0 / head_dim)
    angles = np.arange(max_pos, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


# ---- reshape: a view ----

@attrs.frozen
class ReshapeParams:
    shape: tuple[int, ...] = attrs.field(converter=lambda s: tuple(int(d) for d in s))


def _resolve_shape(shape: tuple, size: int, have: tuple) -> tuple[int, ...]:
    if list(shape).count(-1) > 1:
        raise ShapeError(f"reshape {shape}: at most one -1")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise ShapeError(f"cannot reshape {have} ({size} elements) to {shape}")
        shape = tuple(size // known if s == -1 else s for s in shape)
    if math.prod(shape) != size:
        raise ShapeError(f"cannot reshape {have} ({size} elements) to {shape} ({math.prod(shape)})")
    return tuple(shape)


def _infer_reshape(params: ReshapeParams, specs):
    (x,) = specs
    return (TensorSpec(_resolve_shape(params.shape, x.size, x.shape), x.dtype),)


def _encode_reshape(ctx, params, inputs, outputs):
    raise PlanError("reshape is a view: it has no dispatch (graphs alias the buffer, tensors use Tensor.reshape)")


RESHAPE = register(OpDef("reshape", _infer_reshape, _encode_reshape, is_view=True))


def reshape(x, *shape):
    """A view of x with another shape (one dimension may be -1): no copy, no dispatch."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = tuple(shape[0])
    if getattr(x, "_wgraph_symbol_", False):
        return apply(RESHAPE, ReshapeParams(shape), (x,))
    if not isinstance(x, Tensor):
        raise ShapeError(f"reshape: expected a Tensor or a graph value, got {type(x).__name__}")
    return x.reshape(*_resolve_shape(tuple(int(s) for s in shape), x.size, x.shape))
