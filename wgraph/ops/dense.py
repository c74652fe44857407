"""The dense ops a layer graph needs: `linear` (x @ W^T + b), `rope` (rotate-half, from tables)
and `reshape` (a view: no copy, no dispatch; in a graph a view node that aliases its input's buffer)."""

from __future__ import annotations

import functools
import math

import attrs
import numpy as np

from wgraph.dtypes import is_int
from wgraph.errors import DtypeError, LimitError, PlanError, ShapeError
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.kernels.registry import kernel, kernels_for, registry, select_variant
from wgraph.ops.attention_loops import CPU_LOOP_LIMIT  # lavapipe's cap on an invocation's loop iterations
from wgraph.tensor import Tensor, TensorSpec


# ---- linear ----

@attrs.frozen
class LinearParams:
    variant: str | None = None  # a registry kernel to run instead of the planned one (tuning, tests)
    split_k: int | None = None  # GEMM: at most this many K slices instead of the planned count (1: none)


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
    linear_plan(specs, params)  # a forced variant or split that does not fit fails here, before any GPU work
    return (TensorSpec(x.shape[:-1] + (n,), "f32"),)


@attrs.frozen
class LinearPlan:
    """The kernel `linear` runs for one shape, and why; a GEMM whose `splits` > 1 sums K slices in a second pass."""

    variant: str
    reason: str
    splits: int = 1


@functools.lru_cache(maxsize=1024)  # a pure function of the shape and the registry: planned on every call
def plan_linear(rows: int, n: int, k: int, weight_dtype: str, variant: str | None = None,
                split_k: int | None = None) -> LinearPlan:
    """GEMV (of the variants whose `max_rows` holds `rows` and whose `min_k` k reaches: the fewest max_rows,
    then the largest min_k) when k fills its 16-byte weight loads, else the GEMM (`plan_gemm`); the numbers come
    from the registry. `variant` / `split_k` force a kernel / the K slices (checked against the shape)."""
    if variant is not None:
        return _forced_plan(rows, n, k, weight_dtype, variant, split_k)
    if split_k is not None:
        return plan_gemm(rows, n, k, weight_dtype, split_k=split_k, why=f"split_k={split_k}: GEMM")
    gemvs = [kv for kv in kernels_for("linear")
             if kv.facts.get("form") == "gemv" and kv.facts.get("weight_dtype") == weight_dtype]
    fits = sorted((kv for kv in gemvs if rows <= kv.limits["max_rows"] and k >= kv.facts.get("min_k", 0)),
                  key=lambda kv: (kv.limits["max_rows"], -kv.facts.get("min_k", 0)))
    if not gemvs or rows < 1 or k < 1:
        return plan_gemm(rows, n, k, weight_dtype, why=f"{rows} rows of {k} features: GEMM")
    if not fits:
        most = max(kv.limits["max_rows"] for kv in gemvs)
        return plan_gemm(rows, n, k, weight_dtype, why=f"{rows} rows > {most} (GEMV's most): GEMM")
    g = fits[0]
    if k % g.limits["k_multiple"]:
        return plan_gemm(rows, n, k, weight_dtype,
                         why=f"{rows} rows but in_features {k} is not a multiple of {g.limits['k_multiple']} "
                             f"({weight_dtype} weights per 16-byte load): GEMM")
    lanes = g.threads // g.limits["features_per_workgroup"]
    return LinearPlan(g.name, f"{rows} rows <= {g.limits['max_rows']}: GEMV, one pass over W, {lanes} lanes per "
                              f"weight row (in_features {k}), {g.limits['k_multiple']} {weight_dtype} weights per "
                              f"16-byte load")


def _forced_plan(rows: int, n: int, k: int, weight_dtype: str, variant: str, split_k: int | None) -> LinearPlan:
    kv = registry().get(variant)
    if kv is None or kv.op != "linear":
        raise PlanError(f"linear: variant={variant!r} is not a linear kernel; they are "
                        f"{[v.name for v in kernels_for('linear')]}")
    if kv.facts.get("weight_dtype") != weight_dtype:
        raise DtypeError(f"linear: variant {variant} takes {kv.facts.get('weight_dtype')} weights, W is {weight_dtype}")
    if kv.facts.get("form") == "gemm" and not _takes_k(kv, k) or k % kv.limits["k_multiple"]:
        raise ShapeError(f"linear: variant {variant} needs in_features % {kv.limits['k_multiple']} == 0"
                         f"{' and > 0' if kv.limits['k_multiple'] > 1 else ''}, got {k}")
    if kv.facts.get("form") == "gemm":
        return plan_gemm(rows, n, k, weight_dtype, variant=variant, split_k=split_k, why=f"forced: variant={variant}")
    if split_k is not None:
        raise PlanError(f"linear: split_k={split_k} needs a GEMM variant; {variant} is a GEMV")
    if rows > kv.limits["max_rows"]:
        raise LimitError(f"linear: variant {variant} serves at most {kv.limits['max_rows']} rows of x, got {rows}")
    return LinearPlan(variant, f"forced: variant={variant}")


def _gemm_kernels(weight_dtype: str) -> list:
    return [kv for kv in kernels_for("linear")
            if kv.facts.get("form") == "gemm" and kv.facts.get("weight_dtype") == weight_dtype]


def _takes_k(kv, k: int) -> bool:
    """Whether GEMM kernel `kv` reads rows of k elements: vec4 loads need k % 4 == 0, and a row to exist (an
    empty x still binds 4 bytes, less than one vec4)."""
    return k % kv.limits["k_multiple"] == 0 and (k > 0 or kv.limits["k_multiple"] == 1)


def gemm_tiles(kv, rows: int, n: int) -> int:
    """Output tiles (workgroups before any K split) of GEMM kernel `kv` for [rows, n]."""
    return ceil_div(rows, kv.const("TILE_M")) * ceil_div(n, kv.const("TILE_N"))


def gemm_k_split(kv, k: int, splits: int) -> int:
    """Elements of K per slice for at most `splits` slices: whole TILE_K steps."""
    step = kv.const("TILE_K")
    return ceil_div(ceil_div(k, max(splits, 1)), step) * step


def plan_gemm(rows: int, n: int, k: int, weight_dtype: str, *, why: str = "GEMM", variant: str | None = None,
              split_k: int | None = None) -> LinearPlan:
    """The first GEMM configuration (registry order) whose `k_multiple` divides k and whose output has at least
    `min_tiles` tiles; K cut into slices while the tiles make fewer than its `fill_workgroups` workgroups."""
    if variant is None:
        fits = [kv for kv in _gemm_kernels(weight_dtype)
                if _takes_k(kv, k) and gemm_tiles(kv, rows, n) >= kv.facts["min_tiles"]]
        if not fits:
            raise PlanError(f"linear: no GEMM kernel for {weight_dtype} weights takes {rows} rows, in_features {k} "
                            f"(the registry's last GEMM should take any k and any tiles)")
        kv = fits[0]
    else:
        kv = kernel(variant)
    tiles = gemm_tiles(kv, rows, n)
    if split_k is None:
        fill = kv.facts["fill_workgroups"]
        wanted = 1 if tiles >= fill or not tiles else min(kv.facts["max_splits"], ceil_div(fill, tiles),
                                                          max(1, k // kv.facts["min_split_k"]))
    elif not 1 <= split_k <= kv.facts["max_splits"]:
        raise LimitError(f"linear: split_k={split_k} must be in [1, {kv.facts['max_splits']}] for {kv.name}")
    else:
        wanted = split_k
    k_split = gemm_k_split(kv, k, wanted)
    splits = max(1, ceil_div(k, k_split)) if k_split else 1
    tile = f"{kv.const('TILE_M')}x{kv.const('TILE_N')}"
    reason = (f"{why}, {tile} tiles ({tiles} workgroups), {kv.const('THREAD_M')}x{kv.const('THREAD_N')} outputs "
              f"per thread, " + ("loads of 4 along K" if kv.limits["k_multiple"] == 4 else "element loads"))
    if splits > 1:
        reason += f"; K in {splits} slices of {k_split} ({tiles * splits} workgroups) and a summing pass"
    return LinearPlan(kv.name, reason, splits)


def linear_plan(specs, params: LinearParams = LinearParams()) -> LinearPlan:
    """The plan for input specs (x, w, bias)."""
    x, w, _ = specs
    n, k = w.shape
    return plan_linear(math.prod(x.shape[:-1]), n, k, w.dtype, params.variant, params.split_k)


def _encode_linear(ctx, params, inputs, outputs):
    (x, w, b), (y,) = inputs, outputs
    plan = linear_plan((x.spec, w.spec, None), params)
    ctx.chose(plan)
    variant = plan.variant
    n, k = w.shape
    m = math.prod(x.shape[:-1])
    bias = b if b is not None else ctx.fallback("linear.bias")
    kv = kernel(variant)
    if kv.facts.get("form") == "gemv":
        uniforms = {"m": m, "n": n, "k": k, "has_bias": int(b is not None)}
        groups = ctx.grid(ceil_div(n, kv.limits["features_per_workgroup"]))
        return [ctx.dispatch(variant, uniforms=uniforms, bindings={"x": x, "w": w, "bias": bias, "y": y},
                             workgroups=groups, label="linear")]
    return _encode_gemm(ctx, kv, plan, (x, w, b, bias, y), (m, n, k))


def _encode_gemm(ctx, kv, plan: LinearPlan, tensors, dims):
    x, w, b, bias, y = tensors
    m, n, k = dims
    if not m or not n:
        return []  # y is empty
    k_split = gemm_k_split(kv, k, plan.splits)
    if ctx.caps.is_cpu:
        step, unroll = kv.const("TILE_K"), kv.const("K_UNROLL")
        # a k loop of one iteration (K_UNROLL == TILE_K) is unrolled away: lavapipe then counts only the
        # slices (measured: 65,535 slices of ones sum right, 65,536 come out 16 short)
        loops = ceil_div(k_split, step) * (1 if unroll == step else 1 + step // unroll)
        if loops > CPU_LOOP_LIMIT:
            raise LimitError(f"linear: in_features {k} in {plan.splits} slice(s) take {loops} loop iterations per "
                             f"invocation of {kv.name}; {ctx.caps.adapter_name!r} (a CPU adapter) stops at "
                             f"{CPU_LOOP_LIMIT}: pass split_k")
    groups = (ceil_div(m, kv.const("TILE_M")), ceil_div(n, kv.const("TILE_N")), plan.splits)
    uniforms = {"m": m, "n": n, "k": k, "k_split": k_split}
    if plan.splits == 1:
        return [ctx.dispatch(kv.name, uniforms={**uniforms, "has_bias": int(b is not None)},
                             bindings={"x": x, "w": w, "bias": bias, "y": y}, workgroups=groups, label="linear")]
    parts = ctx.scratch((plan.splits, m, n), "f32", "linear.split_k")
    total = kernel("linear_gemm_sum")
    return [ctx.dispatch(kv.name, uniforms={**uniforms, "has_bias": 0},
                         bindings={"x": x, "w": w, "bias": bias, "y": parts}, workgroups=groups, label="linear"),
            ctx.dispatch(total.name, uniforms={"count": m * n, "n": n, "splits": plan.splits,
                                               "has_bias": int(b is not None)},
                         bindings={"parts": parts, "bias": bias, "y": y},
                         workgroups=ctx.grid(ceil_div(m * n, total.threads)), label="linear.split_k_sum")]


LINEAR = register(OpDef("linear", _infer_linear, _encode_linear))


def linear(x, w, b=None, *, variant: str | None = None, split_k: int | None = None, out=None):
    """`x @ W.T + b`: x f32 [..., in], W [out, in] f32 or f16, b f32 [out] or None; f32 accumulation and output.
    `variant` runs that registry kernel instead of the planned one; `split_k` (GEMM) cuts K into at most that
    many slices summed by a second pass (1: none). Both are for tuning and tests; the plan says what it chose."""
    if variant is not None and type(variant) is not str:
        raise PlanError(f"linear: variant must be a kernel name (str) or None, got {type(variant).__name__}")
    if split_k is not None:
        if not is_int(split_k) or split_k < 1:
            raise LimitError(f"linear: split_k={split_k!r} must be an integer >= 1")
        split_k = int(split_k)
    return apply(LINEAR, LinearParams(variant, split_k), (x, w, b), out=out)


# ---- rope ----

@attrs.frozen
class RopeParams:
    pos: int = 0  # position of row 0 (plus pos_buf[0] on the GPU when a position tensor is given)
    rotary_dim: int | None = None  # rotate the first rotary_dim dims of each head (None: all)
    interleaved: bool = False  # pairs (2i, 2i + 1) (GPT-J) instead of (i, i + rotary_dim / 2)


def _infer_rope(params: RopeParams, specs):
    x, cos_t, sin_t, pos_t = specs
    if len(x.shape) != 3:
        raise ShapeError(f"rope: x must be [rows, heads, head_dim], got {x.shape}")
    dim = x.shape[2]
    rd = dim if params.rotary_dim is None else params.rotary_dim
    if rd % 2 or not 2 <= rd <= dim:
        raise ShapeError(f"rope: rotary_dim {rd} must be even and in [2, head_dim {dim}] (x {x.shape})")
    half = rd // 2
    k = kernel(select_variant("rope", output_dtype=x.dtype))
    for name, t in (("cos", cos_t), ("sin", sin_t)):
        if len(t.shape) != 2 or t.shape[1] != half:
            raise ShapeError(f"rope: {name} table must be [max_pos, {half}] for rotary_dim {rd}, got {t.shape}")
        if t.dtype != k.facts["table_dtype"]:
            raise DtypeError(f"rope: {name} table dtype {t.dtype}; x of {x.dtype} takes {k.facts['table_dtype']} tables")
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
    return (TensorSpec(x.shape, x.dtype),)


def _encode_rope(ctx, params: RopeParams, inputs, outputs):
    (x, cos_t, sin_t, pos_t), (y,) = inputs, outputs
    variant = select_variant("rope", output_dtype=x.dtype)
    k = kernel(variant)
    rows, heads, dim = x.shape
    threads = ceil_div(x.size, k.limits["elems_per_word"])  # one per element, or per u32 word of bf16
    return [ctx.dispatch(variant, uniforms={"rows": rows, "heads": heads, "dim": dim, "half": cos_t.shape[1],
                                            "interleaved": int(params.interleaved), "pos": params.pos,
                                            "use_pos_buf": int(pos_t is not None), "table_rows": cos_t.shape[0]},
                         bindings={"x": x, "cos_t": cos_t, "sin_t": sin_t,
                                   "pos_buf": pos_t if pos_t is not None else ctx.fallback("rope.pos"), "y": y},
                         workgroups=ctx.grid(ceil_div(threads, k.threads)), label="rope")]


ROPE = register(OpDef("rope", _infer_rope, _encode_rope))


def rope(x, cos, sin, *, pos=0, pos_offset: int = 0, rotary_dim: int | None = None, interleaved: bool = False,
         out=None):
    """RoPE of x [rows, heads, head_dim] (f32, f16 or bf16) with tables [max_pos, rotary_dim / 2] (x's dtype; f32
    for bf16 x); row r sits at position `pos + r`. The first `rotary_dim` dims of each head (default: all) turn
    in pairs (i, i + rotary_dim / 2) (rotate-half, as Llama), or (2i, 2i + 1) with `interleaved` (GPT-J); the
    other dims pass through. `pos` is an int (checked against the table) or a u32 GPU tensor (plus
    `pos_offset`), read at dispatch time; rows a GPU position puts beyond the table come out as zeros and are
    reported on the device error flag (GpuValueError from dev.check_errors() or the next readback)."""
    if rotary_dim is not None and not is_int(rotary_dim):
        raise ShapeError(f"rope: rotary_dim must be an int or None, got {rotary_dim!r}")
    if type(interleaved) is not bool:
        raise ShapeError(f"rope: interleaved must be True or False, got {interleaved!r}")
    rd = None if rotary_dim is None else int(rotary_dim)
    if isinstance(pos, Tensor) or getattr(pos, "_wgraph_symbol_", False):
        return apply(ROPE, RopeParams(int(pos_offset), rd, interleaved), (x, cos, sin, pos), out=out)
    if not is_int(pos):
        raise ShapeError(f"rope: pos must be an int or a u32 GPU tensor, got {type(pos).__name__}")
    return apply(ROPE, RopeParams(int(pos) + int(pos_offset), rd, interleaved), (x, cos, sin, None), out=out)


def rope_tables(max_pos: int, head_dim: int, base: float = 10000.0, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin tables [max_pos, head_dim / 2] with frequencies base ** (-2i / head_dim); for partial rotary
    pass rotary_dim as head_dim (the exponents run over the rotary dims, as transformers computes them)."""
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
