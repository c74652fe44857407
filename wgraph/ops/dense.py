"""The dense ops a layer graph needs: `linear` (x @ W^T + b), `rmsnorm`, `rope` (rotate-half, from tables)
and `reshape` (a view: no copy, no dispatch; in a graph a view node that aliases its input's buffer)."""

from __future__ import annotations

import functools
import math
import numbers

import attrs
import numpy as np

from wgraph.dtypes import is_int
from wgraph.errors import DtypeError, LimitError, PlanError, ShapeError
from wgraph.ops import elementwise, gemv
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.kernels.registry import kernel, select_variant
from wgraph.tensor import Tensor, TensorSpec


# ---- linear ----

ACTIVATIONS = (None, "swiglu")


@attrs.frozen
class LinearParams:
    """Options fused into the matmul: the RMSNorm eps (used with a norm weight), the activation (None or
    "swiglu": W holds [gate; up]), and a forced registry variant (benchmarks and tests; None: planned)."""

    eps: float = 1e-6
    activation: str | None = None
    variant: str | None = None


def _infer_linear(params: LinearParams, specs):
    x, w, b, norm, residual = specs
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
    if params.activation not in ACTIVATIONS:
        raise ShapeError(f"linear: activation must be one of {ACTIVATIONS}, got {params.activation!r}")
    swiglu = params.activation == "swiglu"
    if swiglu and n % 2:
        raise ShapeError(f"linear: activation='swiglu' needs W [2 * n, in] holding [gate; up], got W {w.shape}")
    if norm is not None:
        if norm.shape != (k,) or norm.dtype != "f32":
            raise ShapeError(f"linear: norm weight must be f32 ({k},) for W {w.shape}, got {norm.dtype} {norm.shape}")
        if not (math.isfinite(params.eps) and params.eps > 0):
            raise ShapeError(f"linear: eps must be a finite number > 0, got {params.eps}")
    out = TensorSpec(x.shape[:-1] + (n // 2 if swiglu else n,), "f32")
    if residual is not None and (residual.shape != out.shape or residual.dtype != "f32"):
        raise ShapeError(f"linear: residual must be f32 {out.shape} (the output's shape), got {residual.dtype} "
                         f"{residual.shape}")
    select_variant("linear", weight_dtype=w.dtype)  # a kernel for the weight dtype
    if params.variant is not None:  # one that can take the call, as far as the device does not matter
        _forced(params.variant, gemv.GemvShape(math.prod(x.shape[:-1]), n, k, w.dtype, swiglu), None)
    return (out,)


@attrs.frozen
class LinearPlan:
    """How `linear` runs for one call: the matmul's kernel, why, and the dispatches in order (the fused GEMV is
    one; the tiled GEMM runs the norm, swiglu and residual as dispatches of their own)."""

    variant: str
    reason: str
    steps: tuple[str, ...] = ("matmul",)


def _forced(variant: str, s: gemv.GemvShape, caps) -> str:
    """The reason text of a forced variant; PlanError unless it can take the call (caps None: skip the device)."""
    kv = kernel(variant)
    if kv.op != "linear":
        raise PlanError(f"linear: variant {variant!r} is a {kv.op} kernel")
    if kv.facts.get("weight_dtype") != s.weight_dtype:
        raise PlanError(f"linear: forced variant {variant} takes {kv.facts.get('weight_dtype')} weights, not "
                        f"{s.weight_dtype}")
    if kv.facts.get("form") != gemv.FORM:
        return "forced: tiled GEMM"
    no = gemv.refusal(kv, s, caps, forced=True)
    if no:
        raise PlanError(f"linear: forced variant {variant} cannot take {s.rows} rows of W [{s.n}, {s.k}] "
                        f"{s.weight_dtype}: it {no}")
    return "forced: " + gemv.describe(kv, s)


@functools.lru_cache(maxsize=1024)  # a pure function of the shape, the options, the caps and the registry
def plan_linear(rows: int, n: int, k: int, weight_dtype: str, caps, *, swiglu: bool = False, norm: bool = False,
                residual: bool = False, variant: str | None = None) -> LinearPlan:
    """The GEMV for 1..8 rows (the first variant of registry/gemv.toml that takes the call: ops/gemv.py), else
    the tiled GEMM with the fused options as dispatches of their own; `variant` forces one (PlanError if it
    cannot take the call)."""
    s = gemv.GemvShape(rows, n, k, weight_dtype, swiglu)
    steps = tuple(name for name, on in (("rmsnorm", norm), ("matmul", True), ("swiglu", swiglu), ("add", residual))
                  if on)
    separate = "" if len(steps) == 1 else f"; {', '.join(x for x in steps if x != 'matmul')} as dispatches of their own"
    if variant is not None:
        why = _forced(variant, s, caps)
        return LinearPlan(variant, why) if kernel(variant).facts.get("form") == gemv.FORM else \
            LinearPlan(variant, why + separate, steps)
    tiled = select_variant("linear", weight_dtype=weight_dtype)
    kv, why = gemv.choose(s, caps) if rows >= 1 else (None, f"{rows} rows")
    if kv is not None:
        return LinearPlan(kv.name, why)
    return LinearPlan(tiled, f"{why}: tiled GEMM{separate}", steps)


def linear_plan(specs, params: LinearParams, caps) -> LinearPlan:
    """The plan for input specs (x, w, bias, norm, residual) on a device's caps."""
    x, w, _b, norm, residual = specs
    n, k = w.shape
    return plan_linear(math.prod(x.shape[:-1]), n, k, w.dtype, caps, swiglu=params.activation == "swiglu",
                       norm=norm is not None, residual=residual is not None, variant=params.variant)


def _encode_linear(ctx, params: LinearParams, inputs, outputs):
    (x, w, b, norm, residual), (y,) = inputs, outputs
    plan = linear_plan(tuple(None if t is None else t.spec for t in inputs), params, ctx.caps)
    ctx.chose(plan)
    n, k = w.shape
    m = math.prod(x.shape[:-1])
    kv = kernel(plan.variant)
    if kv.facts.get("form") == gemv.FORM:
        s = gemv.GemvShape(m, n, k, w.dtype, params.activation == "swiglu")
        return [gemv.dispatch(ctx, kv, s, x=x, w=w, bias=b, norm=norm, residual=residual, y=y, eps=params.eps)]
    # the tiled GEMM, with what a GEMV fuses as dispatches of their own: rmsnorm, matmul, swiglu, add
    made = []
    if norm is not None:
        normed = ctx.scratch(x.shape, "f32", "linear.normed")
        made += RMSNORM.encode(ctx, RmsNormParams(params.eps), (x, norm), (normed,))
        x = normed
    after = plan.steps[plan.steps.index("matmul") + 1:]
    mm = y if not after else ctx.scratch(x.shape[:-1] + (n,), "f32", "linear.matmul")
    uniforms = {"m": m, "n": n, "k": k, "has_bias": int(b is not None)}
    bindings = {"x": x, "w": w, "bias": b if b is not None else ctx.fallback("linear.bias"), "y": mm}
    groups = (ceil_div(n, kv.workgroup_size[0]), ceil_div(m, kv.workgroup_size[1]), 1)
    made.append(ctx.dispatch(plan.variant, uniforms=uniforms, bindings=bindings, workgroups=groups, label="linear"))
    if params.activation == "swiglu":
        act = y if residual is None else ctx.scratch(y.shape, "f32", "linear.swiglu")
        made += elementwise.OPDEFS["swiglu"].encode(ctx, elementwise.BinaryParams(), (mm,), (act,))
        mm = act
    if residual is not None:
        made += elementwise.OPDEFS["add"].encode(ctx, elementwise.BinaryParams(), (mm, residual, None), (y,))
    return made


LINEAR = register(OpDef("linear", _infer_linear, _encode_linear))


def linear(x, w, b=None, *, norm=None, eps: float = 1e-6, activation: str | None = None, residual=None,
           variant: str | None = None, out=None):
    """`act(rmsnorm(x) @ W.T + b) + residual`: x f32 [..., in], W [out, in] f32 or f16, b f32 [out]; f32
    accumulation and output. Each option is fused into the GEMV (1..8 rows of x: one dispatch):
    `norm`: an RMSNorm weight [in] (x / rms(x) * norm, with `eps`) applied to x first; `activation="swiglu"`: W
    holds [gate; up] stacked and the output is silu(gate) * up [..., out / 2]; `residual`: f32 of the output's
    shape, added last. `variant` forces a registry kernel (benchmarks, tests)."""
    if not isinstance(eps, numbers.Real) or isinstance(eps, bool):
        raise ShapeError(f"linear: eps must be a real number, got {type(eps).__name__}")
    if variant is not None and not isinstance(variant, str):
        raise ShapeError(f"linear: variant must be a registry variant name, got {type(variant).__name__}")
    return apply(LINEAR, LinearParams(float(eps), activation, variant), (x, w, b, norm, residual), out=out)


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
