"""The dense ops a layer graph needs: `linear` (x @ W^T + b), `rope` (rotate-half, from tables)
and `reshape` (a view: no copy, no dispatch; in a graph a view node that aliases its input's buffer)."""

from __future__ import annotations

import functools
import math

import attrs
import numpy as np

from wgraph import args
from wgraph.api_types import DTypeLike, Shape, TensorT
from wgraph.dtypes import numpy_dtype_of
from wgraph.errors import ArgumentError, DtypeError, LimitError, PlanError, ShapeError
from wgraph.ggml_blocks import QuantizedWeight
from wgraph.ops import elementwise, gemv
from wgraph.ops.core import OpDef, apply, ceil_div, register, tensor_arg
from wgraph.kernels.registry import kernel, kernels_for, registry, select_variant
from wgraph.ops.cpu_limits import CPU_LOOP_LIMIT  # lavapipe's cap on an invocation's loop iterations
from wgraph.ops.norms import RMSNORM, RmsNormParams
from wgraph.ops.quantized import linear_q
from wgraph.tensor import Tensor, TensorSpec


# ---- linear ----

ACTIVATIONS = gemv.ACTIVATIONS


@attrs.frozen
class LinearParams:
    """Options fused into the matmul: the RMSNorm eps (used with a norm weight), the activation (None or
    "swiglu": W holds [gate; up]); for tuning and tests, a forced registry variant and the GEMM's K slices
    (None: planned)."""

    eps: float = 1e-6
    activation: str | None = None
    variant: str | None = None
    split_k: int | None = None  # GEMM: at most this many K slices instead of the planned count (1: none)


def _infer_linear(params: LinearParams, specs):
    x, w, b, norm, residual = specs
    if len(x.shape) < 1 or len(w.shape) != 2:
        raise ShapeError(f"linear: x must be [..., in] and W [out, in], got x {x.shape} and W {w.shape}")
    n, k = w.shape
    if x.shape[-1] != k:
        raise ShapeError(f"linear: x has {x.shape[-1]} input features (shape {x.shape}), W {w.shape} takes {k}")
    if x.dtype != "f32":
        raise DtypeError(f"linear: x must be f32 (weights may be f32 or f16), got {x.dtype}")
    out = gemv.check_fused_options(f"W {w.shape}", x.shape, n, k, b, norm, residual, params.activation, params.eps)
    select_variant("linear", weight_dtype=w.dtype)  # a kernel for the weight dtype
    args.optional_integer("linear", "split_k", params.split_k, 1)   # params from a graph file: as linear() checks
    if params.variant is not None:
        args.text("linear", "variant", params.variant)  # variant=5 from a graph file was a PlanError
    if params.variant is not None or params.split_k is not None:
        linear_plan(specs, params, None)  # a forced variant or split that does not fit fails here, before GPU work
    return (out,)


@attrs.frozen
class LinearPlan:
    """How `linear` runs for one call: the matmul's kernel, why, and the dispatches in order (the fused GEMV is
    one; the GEMM runs the norm, swiglu and residual as dispatches of their own); a GEMM whose `splits` > 1 sums
    its K slices in a second pass, which applies swiglu and the residual (`steps` then ends at "matmul")."""

    variant: str
    reason: str
    steps: tuple[str, ...] = ("matmul",)
    splits: int = 1


def _forced_gemv(kv, s: gemv.GemvShape, caps) -> str:
    """The reason text of a forced GEMV; gemv.forced_error's class unless it can take the call (caps None: skip
    the device)."""
    no = gemv.refusal(kv, s, caps, forced=True)
    if no:
        error = gemv.forced_error(kv, no, caps, gemv.cpu_loop_refusal(kv, s, caps))
        raise error(f"linear: forced variant {kv.name} cannot take {s.rows} rows of W [{s.n}, {s.k}] "
                    f"{s.weight_dtype}: it {no}")
    return "forced: " + gemv.describe(kv, s)


@functools.lru_cache(maxsize=1024)  # a pure function of the shape, the options, the caps and the registry
def plan_linear(rows: int, n: int, k: int, weight_dtype: str, caps, *, swiglu: bool = False, norm: bool = False,
                residual: bool = False, variant: str | None = None, split_k: int | None = None) -> LinearPlan:
    """The GEMV for 1..8 rows (the first variant of registry/gemv.toml that takes the call: ops/gemv.py), else
    the GEMM (`plan_gemm`, registry/gemm.toml) with the fused options as dispatches of their own. `variant` /
    `split_k` force a kernel / the GEMM's K slices (PlanError, LimitError if they cannot take the call)."""
    s = gemv.GemvShape(rows, n, k, weight_dtype, swiglu)
    steps = tuple(name for name, on in (("rmsnorm", norm), ("matmul", True), ("swiglu", swiglu), ("add", residual))
                  if on)
    if variant is not None:
        kv = registry().get(variant)
        if kv is None or kv.op != "linear":
            raise PlanError(f"linear: variant={variant!r} is not a linear kernel; they are "
                            f"{[v.name for v in kernels_for('linear')]}")
        if kv.facts.get("weight_dtype") != weight_dtype:
            raise DtypeError(f"linear: variant {variant} takes {kv.facts.get('weight_dtype')} weights, W is "
                             f"{weight_dtype}")
        if kv.facts.get("form") == gemv.FORM:
            if split_k is not None:
                raise PlanError(f"linear: split_k={split_k} needs a GEMM variant; {variant} is a GEMV")
            return LinearPlan(variant, _forced_gemv(kv, s, caps))
        if not _takes_k(kv, k):
            raise ShapeError(f"linear: variant {variant} needs in_features % {kv.limits['k_multiple']} == 0"
                             f"{' and > 0' if kv.limits['k_multiple'] > 1 else ''}, got {k}")
        return plan_gemm(rows, n, k, weight_dtype, variant=variant, split_k=split_k,
                         why=f"forced: variant={variant}", steps=steps)
    if split_k is not None:
        return plan_gemm(rows, n, k, weight_dtype, split_k=split_k, why=f"split_k={split_k}: GEMM", steps=steps,
                         caps=caps)
    kv, why = gemv.choose(s, caps) if rows >= 1 and k >= 1 else (None, f"{rows} rows of {k} features")
    if kv is not None:
        return LinearPlan(kv.name, why)
    return plan_gemm(rows, n, k, weight_dtype, why=f"{why}: GEMM", steps=steps, caps=caps)


# what a split GEMM's summing pass (linear_gemm_sum.wgsl) applies to the sums, in this order
SUM_EPILOGUE = ("swiglu", "add")


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


def _gemm_rule(takers: list, rows: int, n: int):
    """The planning rule among GEMM configurations that take k: the first whose output has at least its
    `min_tiles` tiles within its `max_rows`, else the first `fallback` (a small output: split K instead)."""
    fits = [kv for kv in takers if "min_tiles" in kv.facts and gemm_tiles(kv, rows, n) >= kv.facts["min_tiles"]
            and rows <= kv.facts.get("max_rows", rows)]
    fits = fits or [kv for kv in takers if kv.facts.get("fallback")]
    return fits[0] if fits else None


def plan_gemm(rows: int, n: int, k: int, weight_dtype: str, *, why: str = "GEMM", variant: str | None = None,
              split_k: int | None = None, steps: tuple[str, ...] = ("matmul",), caps=None) -> LinearPlan:
    """The first GEMM configuration (registry order) whose `k_multiple` divides k, whose `max_rows` (where it has
    one) is at least rows and whose output has at least `min_tiles` tiles, else the first marked `fallback`; K cut
    into slices while the tiles make fewer than its `fill_workgroups` workgroups. `caps` (None: any device) drops
    the configurations the device cannot run (features, workgroup memory, threads) before the rule. `steps`: the
    call's dispatches in order around "matmul"; where K is cut, the summing pass applies the epilogue steps
    (swiglu, add) and they are no dispatches of their own."""
    if variant is None:
        takers = [kv for kv in _gemm_kernels(weight_dtype) if _takes_k(kv, k)]
        refused = {kv.name: no for kv in takers for no in [gemv.device_refusal(kv, caps)] if no}
        runnable = [kv for kv in takers if kv.name not in refused]
        kv = _gemm_rule(runnable, rows, n)
        if kv is None:
            cls = LimitError if refused else PlanError
            raise cls(f"linear: no GEMM kernel for {weight_dtype} weights takes {rows} rows, in_features {k}"
                      + (f" on {caps.adapter_name!r}: " + "; ".join(f"{v} {no}" for v, no in refused.items())
                         if refused else " (the registry's last GEMM should take any k and any tiles)"))
        preferred = _gemm_rule(takers, rows, n) if refused else kv   # the rule again only where it dropped some
        if preferred is not kv:  # the device cannot run the rule's first choice (a 16 KiB device, WebGPU's default)
            why = f"{why} ({preferred.name} {refused[preferred.name]})"
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
    reason = (f"{why}, {tile} tiles ({tiles} workgroup{'s' if tiles != 1 else ''}), {kv.const('THREAD_M')}x{kv.const('THREAD_N')} outputs "
              f"per thread, " + ("loads of 4 along K" if kv.limits["k_multiple"] == 4 else "element loads"))
    epilogue = [x for x in steps if x in SUM_EPILOGUE]
    if splits > 1:
        reason += f"; K in {splits} slices of {k_split} ({tiles * splits} workgroups) and a summing pass"
        if epilogue:
            reason += f" that applies {', '.join(epilogue)}"
        steps = tuple(x for x in steps if x not in SUM_EPILOGUE)
    separate = [x for x in steps if x != "matmul"]
    if separate:
        reason += f"; {', '.join(separate)} as " + ("a dispatch of its own" if len(separate) == 1
                                                     else "dispatches of their own")
    return LinearPlan(kv.name, reason, steps, splits)


def linear_plan(specs, params: LinearParams, caps) -> LinearPlan:
    """The plan for input specs (x, w, bias, norm, residual) on a device's caps (None: any device)."""
    x, w, _b, norm, residual = specs
    n, k = w.shape
    return plan_linear(math.prod(x.shape[:-1]), n, k, w.dtype, caps, swiglu=params.activation == "swiglu",
                       norm=norm is not None, residual=residual is not None, variant=params.variant,
                       split_k=params.split_k)


def _encode_linear(ctx, params: LinearParams, inputs, outputs):
    (x, w, b, norm, residual), (y,) = inputs, outputs
    plan = linear_plan(tuple(None if t is None else t.spec for t in inputs), params, ctx.caps)
    ctx.chose(plan)
    n, k = w.shape
    m = math.prod(x.shape[:-1])
    kv = kernel(plan.variant)
    if kv.facts.get("form") == gemv.FORM:
        if m == 0:  # y is empty; a forced GEMV's x (4 bytes bound) is too small to bind as vec4s
            return []
        s = gemv.GemvShape(m, n, k, w.dtype, params.activation == "swiglu")
        return gemv.dispatch(ctx, kv, s, x=x, w=w, bias=b, norm=norm, residual=residual, y=y, eps=params.eps)
    # the GEMM, with what a GEMV fuses as dispatches of their own (rmsnorm, matmul, swiglu, add; a split GEMM's
    # summing pass applies swiglu and add)
    made = []
    if norm is not None:
        normed = ctx.scratch(x.shape, "f32", "linear.normed")
        made += RMSNORM.encode(ctx, RmsNormParams(params.eps), (x, norm), (normed,))
        x = normed
    if plan.splits > 1:
        return made + _encode_gemm(ctx, kv, plan, (x, w, b, y), (m, n, k),
                                   SumEpilogue(params.activation == "swiglu", residual))
    after = plan.steps[plan.steps.index("matmul") + 1:]
    mm = y if not after else ctx.scratch(x.shape[:-1] + (n,), "f32", "linear.matmul")
    made += _encode_gemm(ctx, kv, plan, (x, w, b, mm), (m, n, k))
    if params.activation == "swiglu":
        act = y if residual is None else ctx.scratch(y.shape, "f32", "linear.swiglu")
        made += elementwise.OPDEFS["swiglu"].encode(ctx, elementwise.BinaryParams(), (mm,), (act,))
        mm = act
    if residual is not None:
        made += elementwise.OPDEFS["add"].encode(ctx, elementwise.BinaryParams(), (mm, residual, None), (y,))
    return made


@attrs.frozen
class SumEpilogue:
    """What a split GEMM's summing pass applies after the bias: silu(gate) * up of each row's [gate | up] halves,
    then a residual (a tensor of y's shape, or None)."""

    swiglu: bool = False
    residual: Tensor | None = None


def _encode_gemm(ctx, kv, plan: LinearPlan, tensors, dims, epilogue: SumEpilogue = SumEpilogue()):
    x, w, b, y = tensors
    m, n, k = dims
    if not m or not n:
        return []  # y is empty
    bias = b if b is not None else ctx.fallback("linear.bias")
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
    outputs = m * n // 2 if epilogue.swiglu else m * n
    residual = epilogue.residual if epilogue.residual is not None else ctx.fallback("linear.residual")
    return [ctx.dispatch(kv.name, uniforms={**uniforms, "has_bias": 0},
                         bindings={"x": x, "w": w, "bias": bias, "y": parts}, workgroups=groups, label="linear"),
            ctx.dispatch(total.name, uniforms={"outputs": outputs, "n": n, "part_size": m * n, "splits": plan.splits,
                                               "has_bias": int(b is not None), "swiglu": int(epilogue.swiglu),
                                               "has_residual": int(epilogue.residual is not None)},
                         bindings={"parts": parts, "bias": bias, "residual": residual, "y": y},
                         workgroups=ctx.grid(ceil_div(outputs, total.threads)), label="linear.split_k_sum")]


LINEAR = register(OpDef("linear", _infer_linear, _encode_linear, inputs=("x", "w", "b?", "norm?", "residual?")))


def linear(x: TensorT, w: TensorT | QuantizedWeight, b: TensorT | None = None, *, norm: TensorT | None = None,
           eps: float = 1e-6, activation: str | None = None, residual: TensorT | None = None,
           variant: str | None = None, split_k: int | None = None, x_int8: bool = False,
           out: TensorT | None = None) -> TensorT:
    """`act(rmsnorm(x) @ W.T + b) + residual`: x f32 [..., in], W [out, in] f32 or f16, b f32 [out]; f32
    accumulation and output. Each option is fused into the GEMV (1..8 rows of x: one dispatch):
    `norm`: an RMSNorm weight [in] (x / rms(x) * norm, with `eps`) applied to x first; `activation="swiglu"`: W
    holds [gate; up] stacked and the output is silu(gate) * up [..., out / 2]; `residual`: f32 of the output's
    shape, added last. More rows run the tiled GEMM. For tuning and tests: `variant` forces a registry kernel,
    `split_k` cuts the GEMM's K into at most that many slices summed by a second pass (1: none); the plan
    (`Program.explain()`) says what ran. W may be a QuantizedWeight (GGML blocks, `linear_q`): every option fuses
    into its GEMV too (any number of rows: chunks of 8); `variant` then names one of its format's GEMVs, and
    `split_k` is refused (PlanError: the GEMV has no K slices).

    x: [..., in] f32.
    w: the weight W [out, in], f32 or f16 (or a QuantizedWeight).
    b: a bias [out] f32, or None.
    norm: an RMSNorm weight [in] applied to x first (in >= 1; a row of x whose f32 sum of squares overflows
        normalises to zeros, as rmsnorm), or None.
    eps: the fused RMSNorm's, a finite real > 0 (checked with or without norm; unused without it).
    activation: None or "swiglu".
    residual: f32 of the output's shape, added last, or None.
    variant: force a registry kernel by name (a QuantizedWeight: one of its format's GEMVs); None: planned.
    split_k: the most slices the GEMM's K is cut into (1: none); None: planned.
    x_int8: a QuantizedWeight only: allow x rounded to int8 where an integer-dot GEMV is faster (`linear_q`'s);
        an f32 or f16 W refuses it (ArgumentError).
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    eps = args.eps("linear", eps)
    activation = args.choice("linear", "activation", activation, ACTIVATIONS)
    if variant is not None:
        variant = args.text("linear", "variant", variant)  # a registry name: the plan names the choices
    split_k = args.optional_integer("linear", "split_k", split_k, 1)
    x_int8 = args.flag("linear", "x_int8", x_int8)
    if isinstance(w, QuantizedWeight):
        return _linear_quantized(x, w, b, norm=norm, eps=eps, activation=activation, residual=residual,
                                 variant=variant, split_k=split_k, x_int8=x_int8, out=out)
    if x_int8:
        raise ArgumentError("linear: x_int8=True rounds x for a QuantizedWeight's integer-dot GEMVs; this W is a "
                            "dense tensor, whose GEMV and GEMM keep x f32")
    return apply(LINEAR, LinearParams(eps, activation, variant, split_k), (x, w, b, norm, residual), out=out)


def _linear_quantized(x, w: QuantizedWeight, b, *, norm, eps, activation, residual, variant, split_k, x_int8, out):
    """`linear` over GGML blocks: its GEMV (`linear_q`) with every option fused, as the f16 GEMV's; `variant`
    forces one of the format's GEMVs, and split_k, which only a GEMM has, is refused rather than ignored."""
    if split_k is not None:
        raise PlanError(f"linear: split_k={split_k} cuts a GEMM's K; a QuantizedWeight ({w.ggml_type}) runs the "
                        f"quantized GEMV at any number of rows, which has no K slices")
    return linear_q(x, w, b, norm=norm, eps=eps, activation=activation, residual=residual, out=out,
                    variant=variant, x_int8=x_int8)


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
    # as rope() checks it: params from a graph file come here unchecked ("4" raised a bare TypeError, 4.0 passed)
    rotary_dim = args.optional_integer("rope", "rotary_dim", params.rotary_dim)
    rd = dim if rotary_dim is None else rotary_dim
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
    args.integer("rope", "pos", params.pos, 0, args.U32_MAX)
    args.flag("rope", "interleaved", params.interleaved)   # params from a graph file too: every field by its rule
    # With a GPU position these are the least positions the rows can have (the kernel relies on it).
    if x.shape[0] and params.pos + x.shape[0] > cos_t.shape[0]:
        raise LimitError(f"rope: positions {params.pos}..{params.pos + x.shape[0] - 1} (pos + pos_offset + row) "
                         f"exceed the table's {cos_t.shape[0]} rows")
    if pos_t is not None:
        pos_t.check_u32_scalar(f"rope: a GPU position must be a u32 tensor with one value, got {pos_t.shape} "
                               f"{pos_t.dtype}")
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


ROPE = register(OpDef("rope", _infer_rope, _encode_rope, inputs=("x", "cos", "sin", "pos?")))


def rope(x: TensorT, cos: TensorT, sin: TensorT, *, pos: int | TensorT = 0, pos_offset: int = 0,
         rotary_dim: int | None = None, interleaved: bool = False, out: TensorT | None = None) -> TensorT:
    """RoPE of x [rows, heads, head_dim] (f32, f16 or bf16) with tables [max_pos, rotary_dim / 2] (x's dtype; f32
    for bf16 x); row r sits at position `pos + r`. The first `rotary_dim` dims of each head (default: all) turn
    in pairs (i, i + rotary_dim / 2) (rotate-half, as Llama), or (2i, 2i + 1) with `interleaved` (GPT-J); the
    other dims pass through. `pos` is an int (checked against the table) or a u32 GPU tensor (plus
    `pos_offset`), read at dispatch time; rows a GPU position puts beyond the table come out as zeros and are
    reported on the device error flag (GpuValueError from dev.check_errors() or the next readback).

    x: [rows, heads, head_dim], f32, f16 or bf16.
    cos, sin: the tables [max_pos, rotary_dim / 2] (rope_tables), x's dtype (f32 for bf16 x).
    pos: the first row's position: an int or a u32 tensor with one value read at dispatch time.
    pos_offset: added to pos.
    rotary_dim: how many leading dims of each head turn (even, <= head_dim); None: all.
    interleaved: pairs (2i, 2i + 1) (GPT-J) instead of (i, i + rotary_dim / 2) (Llama).
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    pos_offset = args.integer("rope", "pos_offset", pos_offset)
    rd = args.optional_integer("rope", "rotary_dim", rotary_dim)  # even and <= head_dim: a shape rule (infer)
    interleaved = args.flag("rope", "interleaved", interleaved)
    if isinstance(pos, Tensor) or getattr(pos, "_wgraph_symbol_", False):
        return apply(ROPE, RopeParams(pos_offset, rd, interleaved), (x, cos, sin, pos), out=out)
    if not args.is_int(pos) or not 0 <= pos <= args.U32_MAX:   # a position, as a GPU one, before the offset
        raise args.fail("rope", "pos", pos, f"an integer in [0, {args.U32_MAX}] or a u32 GPU tensor")
    start = args.integer("rope", "pos + pos_offset", int(pos) + pos_offset)
    return apply(ROPE, RopeParams(start, rd, interleaved), (x, cos, sin, None), out=out)


def rope_tables(max_pos: int, head_dim: int, base: float = 10000.0,
                dtype: DTypeLike = np.float32) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin tables [max_pos, head_dim / 2] with frequencies base ** (-2i / head_dim); for partial rotary
    pass rotary_dim as head_dim (the exponents run over the rotary dims, as transformers computes them).

    max_pos: the tables' rows (positions 0 .. max_pos - 1).
    head_dim: the rotated dims (even); the tables have head_dim / 2 columns.
    base: the frequency base (RoPE's theta), a finite real > 0.
    dtype: the numpy float dtype of the tables (np.float32, np.float16, np.float64; "f32", "f16", "float32" and
        torch.float32 spell them too).
    """
    max_pos = args.integer("rope_tables", "max_pos", max_pos)
    head_dim = args.integer("rope_tables", "head_dim", head_dim, 2)
    if head_dim % 2:
        raise args.fail("rope_tables", "head_dim", head_dim, "even (the tables hold head_dim / 2 frequencies)")
    base = args.real("rope_tables", "base", base, 0.0, open_lo=True)
    dt = numpy_dtype_of(dtype)
    if dt is None or dt.kind != "f":
        raise args.fail("rope_tables", "dtype", dtype, "a numpy float dtype (np.float32, np.float16, np.float64; "
                        "'f32', 'f16', 'float32' and torch.float32 spell them too)")
    dtype = dt
    inv = base ** (-np.arange(0, head_dim // 2, dtype=np.float64) * 2.0 / head_dim)
    return cos_sin_rows(max_pos, inv, dtype)


# Positions a block of cos_sin_rows: its float64 temporaries are 8 bytes x this x the columns (64 MiB at 128 columns)
ROPE_BLOCK_ROWS = 65536


def cos_sin_rows(max_pos: int, inv: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of position x inv [max_pos, inv.size] as `dtype`, in blocks of ROPE_BLOCK_ROWS positions: the whole
    float64 angle, cos and sin arrays at once were ~3 GB of temporaries at max_pos 2**20 with 128 frequencies. Each
    element is the float64 product, cos and sin rounded once to `dtype`, as the unblocked form gave them."""
    cos = np.empty((max_pos, inv.size), dtype)
    sin = np.empty((max_pos, inv.size), dtype)
    for lo in range(0, max_pos, ROPE_BLOCK_ROWS):
        hi = min(lo + ROPE_BLOCK_ROWS, max_pos)
        angles = np.arange(lo, hi, dtype=np.float64)[:, None] * inv[None, :]
        cos[lo:hi] = np.cos(angles)   # the assignment's cast is astype's: float64 rounded once to `dtype`
        np.sin(angles, out=angles)
        sin[lo:hi] = angles
    return cos, sin


# ---- reshape: a view ----

@attrs.frozen
class ReshapeParams:
    shape: tuple[int, ...] = attrs.field(converter=lambda s: args.view_shape("reshape", "shape", s))


def _resolve_shape(shape: tuple, size: int, have: tuple) -> tuple[int, ...]:
    """`shape` (one -1 inferred) for a view of `size` elements; ShapeError naming both shapes otherwise."""
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise ShapeError(f"reshape: cannot view {have} ({size} elements) as shape={shape}")
        shape = tuple(size // known if s == -1 else s for s in shape)
    if math.prod(shape) != size:
        raise ShapeError(f"reshape: cannot view {have} ({size} elements) as shape={shape} ({math.prod(shape)})")
    return tuple(shape)


def _infer_reshape(params: ReshapeParams, specs):
    (x,) = specs
    return (TensorSpec(_resolve_shape(params.shape, x.size, x.shape), x.dtype),)


def _encode_reshape(ctx, params, inputs, outputs):
    raise PlanError("reshape is a view: it has no dispatch (graphs alias the buffer, tensors use Tensor.reshape)")


RESHAPE = register(OpDef("reshape", _infer_reshape, _encode_reshape, is_view=True, inputs=("x",)))


def reshape(x: TensorT, *shape: int | Shape) -> TensorT:
    """A view of x with another shape (one dimension may be -1): no copy, no dispatch.

    x: a Tensor or graph Value.
    shape: the new shape, as integers or one tuple; one of them may be -1 (inferred).
    """
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    shape = args.view_shape("reshape", "shape", shape)
    if getattr(x, "_wgraph_symbol_", False):
        return apply(RESHAPE, ReshapeParams(shape), (x,))
    tensor_arg("reshape", "x", x)
    return x.reshape(*_resolve_shape(shape, x.size, x.shape))
