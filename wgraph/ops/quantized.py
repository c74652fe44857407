"""Ops on weights held as GGML blocks (wgraph/ggml_blocks.py `QuantizedWeight`): `linear_q`,
act(rmsnorm(x) @ W.T + b) + residual by a GEMV that reads W's raw blocks and dequantizes them in registers, every
option fused into its one dispatch as in the f16 GEMV (an x_int8 call of >= 65536 Q4_0 / Q4_1 output rows adds a
pre-pass dispatch that rounds x once: `_round_x`), and `embedding_q`, the rows of a quantized table that ids
pick, as f32. `ops.linear` and `ops.embedding` call them when given a QuantizedWeight."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import attrs

from wgraph import args
from wgraph.api_types import Ids, TensorT
from wgraph.errors import DtypeError, PlanError, ShapeError
from wgraph.host_arrays import host_ids
from wgraph.ggml_blocks import BlockFormat, QuantizedWeight, block_format, check_matrix
from wgraph.kernels.registry import Kernel, kernel, kernels_for
from wgraph.ops.core import OpDef, adapter_refusal, apply, ceil_div, register, size_refusal, speed_rules
from wgraph.ops.cpu_limits import halvings, loop, loop_cap_refusal
from wgraph.ops.gemv import (ACTIVATIONS, check_fused_options, core_constants, device_refusal, forced_error,
                             walk_constants)
from wgraph.tensor import Tensor, TensorSpec

if TYPE_CHECKING:
    from wgraph.device import Caps

FUSIONS = ("rmsnorm", "bias", "swiglu", "residual")  # what a plan's reason names as fused into the GEMV


def _check_blocks(spec, fmt: BlockFormat, n: int, k: int, where: str) -> None:
    words = fmt.words(n, k)
    if spec is not None and spec.dtype != "u32":   # a wrong dtype is a DtypeError (docs/errors.md)
        raise DtypeError(f"{where}: a {fmt.name} [{n}, {k}] weight's blocks must be u32 [{words}], got dtype "
                         f"{spec.dtype}")
    if spec is None or spec.shape != (words,):
        got = "nothing" if spec is None else f"{spec.dtype} {list(spec.shape)}"
        raise ShapeError(f"{where}: a {fmt.name} [{n}, {k}] weight is u32 [{words}] of blocks, got {got}")


def _weight(w, where: str, name: str) -> QuantizedWeight:
    if not isinstance(w, QuantizedWeight):
        raise DtypeError(f"{where}: {name} must be a QuantizedWeight, got {type(w).__name__}")
    if not (isinstance(w.blocks, Tensor) or getattr(w.blocks, "_wgraph_symbol_", False)):
        raise DtypeError(f"{where}: the {w.ggml_type} weight's blocks are host data ({type(w.blocks).__name__}); "
                         f"upload them first (w.upload(device)) or give a graph value")
    return w


# ---- linear_q ----

@attrs.frozen
class QuantLinearParams:
    """The weight's format and logical shape (its blocks are the op's second input), the fused options (the
    RMSNorm eps, used with a norm weight; the activation: None or "swiglu", W holding [gate; up]), a forced
    registry `variant` instead of the planner's choice, and whether x may be rounded to int8 (`x_int8`)."""

    ggml_type: str
    out_features: int = attrs.field(converter=lambda d: args.integer("linear", "out_features", d, 1))
    in_features: int = attrs.field(converter=lambda d: args.integer("linear", "in_features", d, 1))
    eps: float = 1e-6
    activation: str | None = None
    variant: str | None = None
    x_int8: bool = attrs.field(default=False, converter=lambda v: args.flag("linear", "x_int8", v))


@attrs.frozen
class QuantLinearPlan:
    """The GEMV kernel for one call, the chunks of its max_rows rows of x it runs in, and why."""

    variant: str
    row_chunks: int
    reason: str


def _gemvs(ggml_type: str, candidates: bool = False, x_int8: bool = False) -> list[Kernel]:
    """The format's GEMV variants in registry order: those planned for a plain call; with x_int8, also the planned
    ones that round x to int8 (registry fact x_int8: they come first where the H200 measured them faster); with
    candidates, every one (forcing, the bench)."""
    return [kv for kv in kernels_for("linear_q") if kv.facts.get("ggml_type") == ggml_type
            and (candidates or (not kv.facts.get("candidate") and (x_int8 or not kv.facts.get("x_int8"))))]


def _x_int8_gemvs(ggml_type: str) -> list[Kernel]:
    """Every GEMV of the format that rounds x to int8, candidates among them (registry order)."""
    return [kv for kv in _gemvs(ggml_type, candidates=True) if kv.facts.get("x_int8")]


def gemv_slots(kv: Kernel, n: int, swiglu: bool) -> int:
    """Feature slots of a call: each owns features_per_lane rows of W (gates and their ups with swiglu)."""
    ft = kv.limits["features_per_lane"]
    return n // ft if swiglu else ceil_div(n, ft)


def gemv_workgroups(kv: Kernel, n: int, swiglu: bool) -> int:
    """Workgroups per chunk of max_rows rows of x."""
    return ceil_div(gemv_slots(kv, n, swiglu), kv.threads // kv.limits["lanes"])


def gemv_cpu_loops(kv: Kernel, k: int) -> int:
    """Loop iterations of one invocation of quantized GEMV `kv` (quant_gemv_core.wgsl with its x source and
    gemv_slot_totals.wgsl; the plain and the RoPE epilogues; counted as ops/cpu_limits.py counts them, an upper
    bound) for rows of k weights: the walk along a weight row, BPS = lanes / lanes_per_block blocks a step (unroll
    steps a trip; a reader that stages x copies a stage every stage_steps steps, at most the f32 stage's
    block_weights / 4 vectors a block and row of x: the int8 stages hold fewer), the slot's sums (shuffles and the
    subgroups' partials, or FT + 1 rounds over the lanes without subgroups) and the epilogue's outputs."""
    lim = kv.limits
    lanes, ft, rows = lim["lanes"], lim["features_per_lane"], lim["max_rows"]
    bps = lanes // lim["lanes_per_block"]
    row_blocks = k // lim["block_weights"]
    if kv.const("STAGE_X"):
        steps = ceil_div(row_blocks, bps)
        stage = bps * lim["stage_steps"] * (lim["block_weights"] // 4) * rows  # x vectors a stage copies
        walk = loop(steps) + ceil_div(steps, lim["stage_steps"]) * loop(ceil_div(stage, kv.threads))
    else:
        walk = loop(ceil_div(row_blocks, lim["unroll"] * bps))
    sums = loop(halvings(lanes)) + loop(ceil_div((ft + 1) * rows, lanes), loop(lanes // 8)) + (ft + 1) * loop(lanes)
    return walk + sums + loop(ceil_div(ft * rows, lanes))


def cpu_loop_refusal(kv: Kernel, k: int, caps) -> str | None:
    """Why a CPU adapter cannot run quantized GEMV `kv` over rows of k weights (its loops past the adapter's
    cap), or None; caps None: any device can."""
    # lavapipe stops an invocation's loops at CPU_LOOP_LIMIT silently: 2 rows of x = W = ones(3407872) in Q5_0
    # through quant_gemv_r8_long (16 lanes, 6656 steps of 9 stage copies each) summed to 419456
    return loop_cap_refusal(caps, lambda: gemv_cpu_loops(kv, k), k)


def _refusal(kv: Kernel, n: int, k: int, swiglu: bool, caps, forced: bool) -> str | None:
    """Why GEMV variant `kv` cannot take the call (None: it can). `forced` skips the speed rules (min_n, min_k, a
    `cpu_only` variant's adapter class); caps None skips the device's (features, workgroup memory, a CPU adapter's
    loop cap) and plans as for a GPU."""
    no = device_refusal(kv, caps)
    if no:
        return no
    no = None if forced else adapter_refusal(kv, caps)
    if no:
        return no
    ft = kv.limits["features_per_lane"]
    if swiglu and (ft % 2 or n % ft):
        return f"swiglu needs an even features_per_lane that divides {n}, it has {ft}"
    no = cpu_loop_refusal(kv, k, caps)
    if no:
        return no
    return None if forced else size_refusal(kv, {"n": n, "k": k})


def describe_gemv(kv: Kernel, n: int, swiglu: bool) -> str:
    """A GEMV variant's layout for a call's plan reason (rows of W a workgroup, lanes, loads in flight)."""
    lim = kv.limits
    ft, lanes, lpb = lim["features_per_lane"], lim["lanes"], lim["lanes_per_block"]
    bw = lim["block_weights"]
    if kv.const("STAGE_X"):  # the reader's lane takes its part of a block whole (quant_gemv_core.wgsl)
        share = (f"each reading whole {bw}-weight blocks" if lpb == 1
                 else f"{lpb} per {bw}-weight block, each reading its {bw // lpb} weights whole")
        share += ", x staged in workgroup memory"
        if lim["stage_steps"] > 1:
            share += f" {lim['stage_steps']} steps at a time"
        if lim.get("x_rounded"):
            share += " as a pre-pass rounded it once for the call (a second dispatch)"
    else:
        share = f"{lpb} per {bw}-weight block"
    # a prefetching lane loads its next step's blocks before it sums a step's: one step more in flight
    return (f"{kv.threads // lanes * ft} rows of W per workgroup ({gemv_workgroups(kv, n, swiglu)} workgroups), "
            f"{lanes} lanes per row ({share}), {lim['unroll'] + lim['prefetch']} steps of "
            f"{ft} row(s) in flight per lane" + (f", each x load feeding {ft} rows" if ft > 1 else "")
            + (", subgroup sums" if "subgroup" in kv.features else ", workgroup-memory sums"))


def plan_linear_q(rows: int, n: int, k: int, ggml_type: str, variant: str | None = None, *, swiglu: bool = False,
                  fused: tuple[str, ...] = (), caps: Caps | None = None, x_int8: bool = False) -> QuantLinearPlan:
    """Among the format's GEMV variants (registry order), the first that takes the call (rows <= max_rows,
    n >= min_n, k >= min_k, the device's features, swiglu's row pairs, a CPU adapter's loop cap); more rows run in
    chunks of the taker with the most max_rows (each chunk reads W). A forced `variant` must be one of the format's
    and take the call (LimitError where only a CPU adapter's loop cap stops it). `fused` names the options the
    reason lists; caps None plans for any device.

    rows: rows of x.
    n: output features (W's rows).
    k: input features (W's columns), whole blocks of the format (a ShapeError otherwise, as linear's).
    ggml_type: the weight's GGML block format ("Q8_0", "Q4_0", ...).
    variant: force one of the format's GEMVs by name; None: the first that takes the call.
    swiglu: whether the call fuses swiglu (W holds [gate; up] row pairs).
    fused: the names of the fused options, for the plan's reason.
    caps: the device capabilities to plan for (dev.caps); None: any device.
    x_int8: also plan the GEMVs that round x to int8 per 32 weights (steps of max |x| / 127, f32's smallest normal
        at least: docs/quantized.md) and sum by integer dots, which the registry lists ahead of the f32 ones where
        the H200 measured them faster (Q4_0, Q4_1 and Q5_K on wide outputs, n >= 8192; Q4_0 and Q4_1 at
        n >= 65536 with x rounded once by a pre-pass, a second dispatch); where none takes the call, x stays f32
        (the reason says so). A forced `variant` must then be one that rounds x.
    """
    fn = "plan_linear_q"
    rows = args.integer(fn, "rows", rows)
    n, k = args.integer(fn, "n", n, 1), args.integer(fn, "k", k, 1)
    fmt = block_format(ggml_type, fn)
    ggml_type = fmt.name
    # a matrix that cannot exist (k of part blocks, past the u32 byte offsets) has no plan: linear refuses it
    check_matrix(fmt, (n, k), fn)
    if variant is not None:
        variant = args.text(fn, "variant", variant)
    swiglu = args.flag(fn, "swiglu", swiglu)
    names = tuple(map(args.plain_str, fused)) if isinstance(fused, tuple) else None   # np.str_ by its characters
    if names is None or not all(name is not None and name in FUSIONS for name in names):
        raise args.fail(fn, "fused", fused, f"a tuple of names from {FUSIONS}")
    fused = names
    from wgraph.device import Caps  # the device module imports the ops

    if caps is not None and not isinstance(caps, Caps):
        raise args.fail(fn, "caps", caps, "None or a Caps (dev.caps, Caps.synthetic(...))")
    x_int8 = args.flag(fn, "x_int8", x_int8)
    return _plan_linear_q(rows, n, k, ggml_type, variant, swiglu, fused, caps, x_int8)


def _taker(takers: list[Kernel], rows: int) -> Kernel | None:
    """The planning rule among the variants that take a call: the first (registry order) that holds its rows, else
    the one holding the most (it runs the rows in chunks); None if there are none."""
    fits = [kv for kv in takers if rows <= kv.limits["max_rows"]]
    return fits[0] if fits else max(takers, key=lambda kv: kv.limits["max_rows"], default=None)


@functools.lru_cache(maxsize=1024)  # a pure function of the shape, the options, the caps and the registry
def _plan_linear_q(rows: int, n: int, k: int, ggml_type: str, variant: str | None, swiglu: bool,
                   fused: tuple[str, ...], caps, x_int8: bool = False) -> QuantLinearPlan:
    where = f"linear: {rows} rows of a {ggml_type} [{n}, {k}] weight"
    fusing = f"; {', '.join(fused)} fused" if fused else ""
    if variant is not None:
        chosen = next((kv for kv in _gemvs(ggml_type, candidates=True) if kv.name == variant), None)
        if chosen is None:
            raise PlanError(f"linear: variant {variant!r} is not a {ggml_type} GEMV; those are "
                            f"{[kv.name for kv in _gemvs(ggml_type, candidates=True)]}")
        no = _refusal(chosen, n, k, swiglu, caps, forced=True)
        if no:
            error = forced_error(chosen, no, caps, cpu_loop_refusal(chosen, k, caps))
            raise error(f"{where}: forced variant {variant} {no}")
        if x_int8 and not chosen.facts.get("x_int8"):
            rounding = [kv.name for kv in _x_int8_gemvs(ggml_type)]
            raise PlanError(f"{where}: x_int8=True asks for a GEMV that rounds x to int8, and the forced variant "
                            f"{variant} keeps x f32; those that round it: {rounding}")
        chunks = ceil_div(rows, chosen.limits["max_rows"])
        return QuantLinearPlan(chosen.name, chunks, f"forced; {rows} rows in {chunks} chunk(s) of "
                                                    f"{chosen.limits['max_rows']}: {describe_gemv(chosen, n, swiglu)}"
                                                    f"{fusing}")
    gemvs = _gemvs(ggml_type, x_int8=x_int8)  # with x_int8 the rounding entries too, ahead of those they beat
    if not gemvs:
        raise PlanError(f"linear: no GEMV kernel reads {ggml_type} blocks; the registry's linear_q kernels are "
                        f"{[kv.name for kv in kernels_for('linear_q')]}")
    why: dict[str, list[str]] = {}
    takers = []
    for kv in gemvs:
        no = _refusal(kv, n, k, swiglu, caps, forced=False)
        if no is None:
            takers.append(kv)
        else:
            why.setdefault(no, []).append(kv.name)
    if not takers:
        raise PlanError(f"{where}: no GEMV takes it (" + "; ".join(f"{', '.join(names)} {no}"
                                                                   for no, names in why.items()) + ")")
    g = _taker(takers, rows)
    rounds = g.facts.get("x_int8", False)
    x = ""  # what x_int8 did, ahead of the reason
    if rounds:
        x = "x_int8: x rounded to int8 per 32 weights; "
    elif x_int8:
        x = (f"x_int8: no {ggml_type} GEMV that rounds x to int8 is planned for this call (none was faster here), "
             f"so x stays f32; ")
    if rows <= g.limits["max_rows"]:
        rules = speed_rules(g, "nk")
        sums = "quants against x in int8 by integer dots" if rounds else "blocks dequantized in registers"
        return QuantLinearPlan(g.name, 1 if rows else 0,
                               f"{x}{rows} rows <= {g.limits['max_rows']}{rules}: {ggml_type} GEMV ({sums}), "
                               f"{describe_gemv(g, n, swiglu)}{fusing}")
    most = g.limits["max_rows"]
    chunks = ceil_div(rows, most)
    return QuantLinearPlan(g.name, chunks, f"{x}{rows} rows > {most} (the GEMV's most): {chunks} chunks of {most} "
                                           f"rows in one dispatch, each reading W; {describe_gemv(g, n, swiglu)}{fusing}")


def _fused(params: QuantLinearParams, specs) -> tuple[str, ...]:
    _x, _blocks, b, norm, residual = specs
    on = (norm is not None, b is not None, params.activation == "swiglu", residual is not None)
    return tuple(name for name, used in zip(FUSIONS, on) if used)


def _plan(params: QuantLinearParams, specs, caps) -> QuantLinearPlan:
    x = specs[0]
    return _plan_linear_q(x.size // params.in_features, params.out_features, params.in_features, params.ggml_type,
                          params.variant, params.activation == "swiglu", _fused(params, specs), caps, params.x_int8)


def _infer_linear_q(params: QuantLinearParams, specs):
    x, blocks, b, norm, residual = specs
    fmt = block_format(params.ggml_type, "linear")
    n, k = check_matrix(fmt, (params.out_features, params.in_features), "linear")
    _check_blocks(blocks, fmt, n, k, "linear")
    if len(x.shape) < 1 or x.shape[-1] != k:
        raise ShapeError(f"linear: x must be [..., {k}] for a {fmt.name} [{n}, {k}] weight, got {x.shape}")
    if x.dtype != "f32":
        raise DtypeError(f"linear: x must be f32 with a quantized weight, got {x.dtype}")
    # a graph file's params come here unchecked: each field by linear()'s rules (eps True ran as 1.0)
    out = check_fused_options(f"a {fmt.name} [{n}, {k}] weight", x.shape, n, k, b, norm, residual, params.activation,
                              params.eps)
    if params.variant is not None:
        args.text("linear", "variant", params.variant)  # variant=5 was a PlanError
    _plan(params, specs, None)  # a kernel takes it (a forced variant that cannot fails here, before GPU work)
    return (out,)


def core_uniforms(kv: Kernel, m: int, n: int, k: int, swiglu: bool, *, bias, norm, residual, eps: float) -> dict:
    """The quantized GEMV core's uniform fields (shaders/quant_gemv_fields.wgsl) for a call of m rows."""
    return {"m": m, "n": n, "k": k, "row_blocks": k // kv.limits["block_weights"],
            "slots": gemv_slots(kv, n, swiglu), "out_n": n // 2 if swiglu else n,
            "groups_per_chunk": gemv_workgroups(kv, n, swiglu), "has_bias": int(bias is not None),
            "has_residual": int(residual is not None), "swiglu": int(swiglu), "eps": eps}


def core_bindings(ctx, *, x, blocks, bias, norm) -> dict:
    """The quantized GEMV core's inputs (bias and norm may be None: the fallbacks bind)."""
    return {"x": x, "blocks": blocks, "heads": blocks,
            "norm_w": norm if norm is not None else ctx.fallback("linear_q.norm", 16),
            "bias": bias if bias is not None else ctx.fallback("linear_q.bias")}


def _encode_linear_q(ctx, params: QuantLinearParams, inputs, outputs):
    (x, blocks, b, norm, residual), (y,) = inputs, outputs
    plan = _plan(params, tuple(None if t is None else t.spec for t in inputs), ctx.caps)
    ctx.chose(plan)
    n, k = params.out_features, params.in_features
    m = x.size // k
    if m == 0:  # nothing to compute (and x's buffer is too small to bind as vec4s)
        return []
    kv = kernel(plan.variant)
    swiglu = params.activation == "swiglu"
    uniforms = core_uniforms(kv, m, n, k, swiglu, bias=b, norm=norm, residual=residual, eps=params.eps)
    rounding, x = _round_x(ctx, kv, x, norm, m, k)
    bindings = {**core_bindings(ctx, x=x, blocks=blocks, bias=b, norm=norm),
                "residual": residual if residual is not None else ctx.fallback("linear_q.residual"), "y": y}
    return rounding + [ctx.dispatch(plan.variant, uniforms=uniforms, bindings=bindings,
                                    workgroups=ctx.grid(uniforms["groups_per_chunk"] * plan.row_chunks),
                                    label="linear_q", constants=walk_constants(kv, m, norm=norm))]


# x as the x_rounded GEMVs stage it (shaders/quant_x_round.wgsl): three 16-byte vectors a 32-value block and row
ROUNDED_BLOCK_F32 = 12


def _round_x(ctx, kv: Kernel, x, norm, m: int, k: int) -> tuple[list, Any]:
    """The pre-pass of a GEMV whose registry limit x_rounded is 1 and the x the GEMV then reads: x (times the norm's
    weights) rounded to int8 blocks once for the call, into scratch; no dispatch and x itself for the others, which
    round x in every workgroup as they stage it."""
    if not kv.limits.get("x_rounded"):
        return [], x
    blocks = m * (k // kv.limits["block_weights"])
    xr = ctx.scratch((blocks * ROUNDED_BLOCK_F32,), "f32", "linear_q.x_rounded")
    rounder = kernel("quant_x_round")
    return [ctx.dispatch("quant_x_round", uniforms={"m": m, "k": k, "row_blocks": blocks // m},
                         bindings={"x": x, "norm_w": norm if norm is not None else ctx.fallback("linear_q.norm", 16),
                                   "xr": xr},
                         workgroups=ctx.grid(ceil_div(blocks, rounder.threads)), label="linear_q.x_round",
                         constants=core_constants(norm=norm))], xr


LINEAR_Q = register(OpDef("linear_q", _infer_linear_q, _encode_linear_q,
                          inputs=("x", "w.blocks", "b?", "norm?", "residual?")))


def linear_q(x: TensorT, w: QuantizedWeight, b: TensorT | None = None, *, norm: TensorT | None = None, eps: float = 1e-6,
             activation: str | None = None, residual: TensorT | None = None, out: TensorT | None = None,
             variant: str | None = None, x_int8: bool = False) -> TensorT:
    """`act(rmsnorm(x) @ W.T + b) + residual` for a QuantizedWeight W [out, in] (its blocks a u32 Tensor or graph
    value), every option fused into one GEMV dispatch as `linear`'s (with x_int8 and >= 65536 Q4_0 / Q4_1 output
    rows, x's rounding is a pre-pass dispatch before it): x f32 [..., in], b f32 [out] or None, `norm`
    an RMSNorm weight [in] (with `eps`), `activation="swiglu"` (W holds [gate; up]: output [..., out / 2]),
    `residual` f32 of the output's shape; f32 accumulation and output. `variant` forces one of the format's GEMVs.

    x: [..., in] f32.
    w: the QuantizedWeight [out, in] (GGML blocks; QuantizedWeight.upload puts its blocks on the device).
    b: a bias [out] f32, or None.
    norm: an RMSNorm weight [in] applied to x first, or None.
    eps: the fused RMSNorm's, a finite real > 0 (checked with or without norm; unused without it).
    activation: None or "swiglu".
    residual: f32 of the output's shape, added last, or None.
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    variant: force one of the format's GEMV kernels by name; None: planned.
    x_int8: allow x (after the norm) to be rounded to int8 per 32 weights and summed by integer dots (llama.cpp's
        GEMV does the same) where that GEMV is the faster one (`plan_linear_q`: Q4_0, Q4_1, Q5_K with out_features
        >= 8192); the output moves by ~1e-3 to ~1e-2 of its largest value (docs/quantized.md), and a NaN or inf
        in x (or the norm's weights) makes the outputs it feeds NaN (an inf gives +-inf in f32); a forced
        `variant` must then be such a GEMV. Off: x stays f32.
    """
    w = _weight(w, "linear", "w")
    eps = args.eps("linear", eps)
    activation = args.choice("linear", "activation", activation, ACTIVATIONS)
    if variant is not None:
        variant = args.text("linear", "variant", variant)  # a registry name: the plan names the choices
    x_int8 = args.flag("linear", "x_int8", x_int8)
    return apply(LINEAR_Q, QuantLinearParams(w.ggml_type, w.out_features, w.in_features, eps, activation, variant,
                                             x_int8), (x, w.blocks, b, norm, residual), out=out)


# ---- embedding_q ----

@attrs.frozen
class QuantEmbeddingParams:
    """The table's format and logical shape [vocab, hidden] (its blocks are the op's second input)."""

    ggml_type: str
    vocab: int = attrs.field(converter=lambda d: args.integer("embedding_q", "vocab", d, 1))
    hidden: int = attrs.field(converter=lambda d: args.integer("embedding_q", "hidden", d, 1))


def _embedding_variant(ggml_type: str, where: str = "embedding_q") -> str:
    for kv in kernels_for("embedding_q"):
        if kv.facts.get("ggml_type") == ggml_type:
            return kv.name
    raise PlanError(f"{where}: no kernel gathers {ggml_type} rows; the registry's embedding_q kernels are "
                    f"{[kv.name for kv in kernels_for('embedding_q')]}")


def _check_ids(ids, where: str) -> None:
    if ids.dtype != "u32":
        raise DtypeError(f"{where}: ids must be u32, got {ids.dtype}")


def _infer_embedding_q(params: QuantEmbeddingParams, specs):
    # named as the op: what reaches infer unchecked is a graph's node (a graph file, Program.update); the calls
    # check ids and the kernel first under their own names (embedding or embedding_q)
    ids, blocks = specs
    fmt = block_format(params.ggml_type, "embedding_q")
    v, h = check_matrix(fmt, (params.vocab, params.hidden), "embedding_q")
    _check_blocks(blocks, fmt, v, h, "embedding_q")
    _check_ids(ids, "embedding_q")
    _embedding_variant(fmt.name)
    return (TensorSpec(ids.shape + (h,), "f32"),)


def _encode_embedding_q(ctx, params: QuantEmbeddingParams, inputs, outputs):
    (ids, blocks), (out,) = inputs, outputs
    variant = _embedding_variant(params.ggml_type)
    kv = kernel(variant)
    uniforms = {"n": out.size, "hidden": params.hidden, "vocab": params.vocab,
                "row_blocks": params.hidden // kv.limits["block_weights"]}
    return [ctx.dispatch(variant, uniforms=uniforms, bindings={"ids": ids, "blocks": blocks, "out": out},
                         workgroups=ctx.grid(ceil_div(out.size, kv.threads)), label="embedding_q")]


EMBEDDING_Q = register(OpDef("embedding_q", _infer_embedding_q, _encode_embedding_q, inputs=("ids", "table.blocks")))


def embedding_q(ids: Ids, table: QuantizedWeight, *, out: TensorT | None = None) -> Any:
    """table[ids] as f32 [..., hidden] for a QuantizedWeight table [vocab, hidden]: ids as in `ops.embedding`
    (host ids >= vocab raise LimitError; a GPU id >= vocab gives a row of zeros and sets the device error flag).

    ids: token ids: ints, a numpy integer array or a u32 GPU tensor.
    table: the QuantizedWeight [vocab, hidden] (its blocks on the device).
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    return _gather_q(ids, table, out, "embedding_q")


def _gather_q(ids: Ids, table: QuantizedWeight, out: TensorT | None, where: str) -> Any:
    """embedding_q's work, its errors naming `where`: the call the user made (embedding of a quantized table comes
    here too; its errors said "embedding:" from embedding_q's own call)."""
    table = _weight(table, where, "table")
    params = QuantEmbeddingParams(table.ggml_type, table.out_features, table.in_features)
    _embedding_variant(table.ggml_type, where)
    if isinstance(ids, Tensor) or getattr(ids, "_wgraph_symbol_", False) or not isinstance(table.blocks, Tensor):
        if isinstance(getattr(ids, "dtype", None), str):
            _check_ids(ids, where)
        return apply(EMBEDDING_Q, params, (ids, table.blocks), out=out)
    host = host_ids(ids, table.out_features, where)
    return apply(EMBEDDING_Q, params, (table.blocks.device.tensor(host, "u32"), table.blocks), out=out)

