"""The GEMV form of `linear` (1..8 rows of x, the decode step's matmuls): which registry variant takes a call
(the first of shaders/registry/gemv.toml that accepts it, with the reason) and its one dispatch, with the
fused RMSNorm prologue and the bias / swiglu / residual epilogue (wgraph/shaders/gemv.wgsl)."""

from __future__ import annotations

import attrs

from wgraph import args
from wgraph.errors import DtypeError, LimitError, PlanError, ShapeError
from wgraph.kernels.registry import Kernel, kernels_for
from wgraph.ops import core
from wgraph.ops.core import ceil_div
from wgraph.ops.cpu_limits import halvings, loop, loop_cap_refusal
from wgraph.tensor import TensorSpec

FORM = "gemv"
ACTIVATIONS = (None, "swiglu")   # linear's epilogue activations: none, or SwiGLU over W's [gate; up] halves


def check_fused_options(weight: str, x_shape: tuple, n: int, k: int, b, norm, residual, activation, eps):
    """The checks `linear` makes of its fused options, for W [n, k] of any kind (f32 / f16 tensors, GGML blocks;
    `weight` names it in the messages): bias, activation, the norm weight and eps, residual. The parameters may
    come from a graph file, unchecked. A wrong shape is a ShapeError, the right shape of another dtype a
    DtypeError. Returns the output's spec."""
    if b is not None:
        if b.shape != (n,):
            raise ShapeError(f"linear: bias must be ({n},) for {weight}, got {b.shape}")
        if b.dtype != "f32":
            raise DtypeError(f"linear: bias must be f32, got {b.dtype}")
    args.choice("linear", "activation", activation, ACTIVATIONS)
    swiglu = activation == "swiglu"
    if swiglu and n % 2:
        raise ShapeError(f"linear: activation='swiglu' needs W [2 * n, in] holding [gate; up], got {weight}")
    args.eps("linear", eps)  # as linear() checks it: used with a norm
    if norm is not None and k == 0:   # the mean square of an empty row is 0 / 0 (rmsnorm refuses one too)
        raise ShapeError(f"linear: norm= needs W's in_features >= 1 (an empty row has no mean square), got {weight}")
    if norm is not None and (norm.shape != (k,) or norm.dtype != "f32"):
        raise (ShapeError if norm.shape != (k,) else DtypeError)(
            f"linear: norm weight must be f32 ({k},) for {weight}, got {norm.dtype} {norm.shape}")
    out = TensorSpec(tuple(x_shape[:-1]) + (n // 2 if swiglu else n,), "f32")
    if residual is not None and (residual.shape != out.shape or residual.dtype != "f32"):
        raise (ShapeError if residual.shape != out.shape else DtypeError)(
            f"linear: residual must be f32 {out.shape} (the output's shape), got {residual.dtype} {residual.shape}")
    return out


@attrs.frozen
class GemvShape:
    """What the GEMV choice depends on: rows of x, W [n, k] and its dtype, and whether a lane pairs row r with
    row r + n / 2 (swiglu: W holds [gate; up]; linear_rope_kv_append's rotation pairs)."""

    rows: int
    n: int
    k: int
    weight_dtype: str
    swiglu: bool = False


def gemv_kernels(weight_dtype: str, op: str = "linear", **facts) -> tuple[Kernel, ...]:
    """The GEMV variants of `op` for one weight dtype (and the other `facts`: linear_rope_kv_append's
    cache_dtype), in registry (planning) order."""
    return tuple(kv for kv in kernels_for(op)
                 if kv.facts.get("form") == FORM and kv.facts.get("weight_dtype") == weight_dtype
                 and all(kv.facts.get(name) == value for name, value in facts.items()))


def slots(kv: Kernel, s: GemvShape) -> int:
    """Feature slots of a call: each owns features_per_lane rows of W (gates and their ups with swiglu)."""
    ft = kv.limits["features_per_lane"]
    return s.n // ft if s.swiglu else ceil_div(s.n, ft)


def workgroups(kv: Kernel, s: GemvShape) -> int:
    return ceil_div(slots(kv, s), kv.threads // kv.limits["lanes"])


def device_refusal(kv: Kernel, caps) -> str | None:
    """Why the device cannot run kernel `kv` (a GEMV or GEMM variant; core.device_refusal's text), or None; caps
    None: any device can."""
    refused = None if caps is None else core.device_refusal(kv, caps)
    return refused[1] if refused else None


def forced_error(kv: Kernel, why: str, caps, cpu_why: str | None) -> type:
    """The error a forced variant `kv` refused for `why` raises: the device's class where the device refused it
    (core.device_refusal: UnsupportedError for a feature, LimitError for a limit, as at dispatch), LimitError
    where `why` is a CPU adapter's loop cap (`cpu_why`), else PlanError (the call does not fit the kernel)."""
    refused = None if caps is None else core.device_refusal(kv, caps)
    if refused and refused[1] == why:
        return refused[0]
    return LimitError if why == cpu_why else PlanError


def cpu_loops(kv: Kernel, s: GemvShape) -> int:
    """Loop iterations of one invocation of GEMV variant `kv` (gemv_core.wgsl, counted as ops/cpu_limits.py
    counts them; an upper bound): the walk along a weight row in steps of unroll x (lanes / row_groups) 16-byte
    loads (the PREFETCH loop, the plain one and the tail), slot_totals' sums (shuffles and the subgroups'
    partials, or a lane's partials without subgroups) and the epilogue's outputs."""
    lim = kv.limits
    klanes = lim["lanes"] // lim["row_groups"]
    loads = ceil_div(s.k, lim["k_multiple"])
    sums_per_slot = (lim["features_per_lane"] + 1) * lim["max_rows"]
    sums = (loop(halvings(lim["lanes"])) + loop(ceil_div(sums_per_slot, lim["lanes"]), loop(lim["lanes"] // 8))
            + loop(klanes))
    outs = loop(ceil_div(lim["features_per_lane"] * lim["max_rows"], lim["lanes"]))
    return loop(ceil_div(loads, lim["unroll"] * klanes)) + 2 * loop(lim["unroll"]) + sums + outs


def cpu_loop_refusal(kv: Kernel, s: GemvShape, caps) -> str | None:
    """Why a CPU adapter cannot run the call through `kv` (its loops past the adapter's cap), or None."""
    # lavapipe stops an invocation's loops at CPU_LOOP_LIMIT silently: a row of 4.5e6 ones through
    # gemv_r8_groups_wg_f32 summed to 4194336
    return loop_cap_refusal(caps, lambda: cpu_loops(kv, s), s.k)


def refusal(kv: Kernel, s: GemvShape, caps, *, forced: bool = False) -> str | None:
    """Why variant `kv` cannot take the call (None: it can). `forced` skips the speed rules (min_k, min_n, a
    `cpu_only` variant's adapter class); caps None skips the device's (features, workgroup memory, a CPU adapter's
    loop cap) and plans as for a GPU."""
    lim = kv.limits
    no = device_refusal(kv, caps)
    if no:
        return no
    no = None if forced else core.adapter_refusal(kv, caps)
    if no:
        return no
    if s.rows > lim["max_rows"] and not kv.facts.get("row_passes"):
        return f"takes at most {lim['max_rows']} rows"
    if s.n < 1 or s.k < 1:
        return f"needs a non-empty W, got [{s.n}, {s.k}]"
    if s.k % lim["k_multiple"]:
        return (f"needs in_features a multiple of {lim['k_multiple']} ({s.weight_dtype} weights per 16-byte "
                f"load), got {s.k}")
    if s.swiglu and (lim["features_per_lane"] % 2 or s.n % lim["features_per_lane"]):
        return (f"swiglu needs an even features_per_lane that divides {s.n} (as do RoPE's pairs), it has "
                f"{lim['features_per_lane']}")
    no = cpu_loop_refusal(kv, s, caps)
    if no:
        return no
    return None if forced else core.size_refusal(kv, {"k": s.k, "n": s.n})


def choose(s: GemvShape, caps, kernels: tuple[Kernel, ...] | None = None) -> tuple[Kernel | None, str]:
    """The first GEMV variant (of `kernels`; None: linear's for the weight dtype) that takes the call and why;
    (None, why none does) otherwise."""
    kernels = gemv_kernels(s.weight_dtype) if kernels is None else kernels
    if not kernels:
        return None, f"no GEMV kernel for {s.weight_dtype} weights"
    # the adapter class's most: a CPU adapter's prefill class takes any rows, in passes (registry fact row_passes)
    eligible = [kv for kv in kernels if core.adapter_refusal(kv, caps) is None]
    most = max((kv.limits["max_rows"] for kv in eligible), default=0)
    if s.rows > most and not any(kv.facts.get("row_passes") for kv in eligible):
        return None, f"{s.rows} rows > {most} (a GEMV's most)"
    why: dict[str, list[str]] = {}
    for kv in kernels:
        no = refusal(kv, s, caps)
        if no is None:
            return kv, describe(kv, s)
        why.setdefault(no, []).append(kv.name)
    return None, f"{s.rows} rows, but no GEMV takes them (" + "; ".join(
        f"{', '.join(names)} {no}" for no, names in why.items()) + ")"


def describe(kv: Kernel, s: GemvShape) -> str:
    lim = kv.limits
    ft, lanes = lim["features_per_lane"], lim["lanes"]
    per_wg = kv.threads // lanes * ft
    groups = lim["row_groups"]
    split = (f"{lanes // groups} lanes per row x {groups} row groups of {lim['max_rows'] // groups} rows of x"
             if groups > 1 else f"{lanes} lanes per row")
    rows = (f"{s.rows} rows <= {lim['max_rows']}" if s.rows <= lim["max_rows"] else
            f"{s.rows} rows in {row_passes(kv, s)} passes of {lim['max_rows']}")
    return (f"{rows}{core.speed_rules(kv, 'kn')}: GEMV, "
            f"{per_wg} rows of W per workgroup ({workgroups(kv, s)} workgroups), {split}, "
            f"{lim['unroll'] * ft} 16-byte {s.weight_dtype} loads in flight per lane"
            + (", each x load feeding " + str(ft) + " rows" if ft > 1 else "")
            + (", subgroup sums" if "subgroup" in kv.features else ", workgroup-memory sums"))


def row_passes(kv: Kernel, s: GemvShape) -> int:
    """Dispatches of a call: one, or with registry fact `row_passes` (a CPU adapter's prefill class) one a
    max_rows rows of x, each reading all of W (on lavapipe 3-4x less time than the tiled GEMM's one)."""
    return max(1, ceil_div(s.rows, kv.limits["max_rows"])) if kv.facts.get("row_passes") else 1


def pass_rows(kv: Kernel, s: GemvShape, row0: int = 0) -> int:
    """Rows of x a dispatch from row `row0` of x serves (a one-pass call's rows are at most max_rows: refusal)."""
    return min(s.rows - row0, kv.limits["max_rows"])


def core_uniforms(kv: Kernel, s: GemvShape, *, bias, norm, residual, eps: float, row0: int = 0) -> dict:
    """The GEMV core's uniform fields (shaders/gemv_fields.wgsl) for a call, or for its pass from row `row0` of x."""
    return {"m": pass_rows(kv, s, row0), "row0": row0, "n": s.n, "k": s.k, "slots": slots(kv, s),
            "out_n": s.n // 2 if s.swiglu else s.n,
            "has_bias": int(bias is not None), "has_residual": int(residual is not None),
            "swiglu": int(s.swiglu), "eps": eps}


def core_constants(*, norm) -> dict:
    """HAS_NORM, the overridable constant of every kernel that folds RMSNorm in (the GEMV cores, quant_x_round):
    the norm's prologue compiled in or out."""
    return {"HAS_NORM": norm is not None}


def walk_constants(kv: Kernel, rows: int, *, norm) -> dict:
    """The overridable constants of a GEMV walk (shaders/gemv_core.wgsl, quant_gemv_core.wgsl) for a dispatch
    serving `rows` rows of x (a pass's: pass_rows; a quantized call's, in chunks of max_rows): RMSNorm folded in
    or not, and ALL_ROWS where every chunk of a class of several rows is full (the walk's per-row test compiled
    out). On an H100 that took the 8-row GEMVs 0.61-0.94x the time in f16 (h100-gemv-allrows-ab-1207.log) and
    0.79-0.95x in Q4_0 / Q4_K / Q8_0 / Q4_1 / Q6_K (h100-quant-allrows-ab-1207.log); the one-row f16 walk, whose
    one test is 0 < m, ran 1.00-1.03x and the quantized ones within their noise, so a one-row class keeps it."""
    most = kv.limits["max_rows"]
    return {**core_constants(norm=norm), "ALL_ROWS": most > 1 and rows % most == 0}


def core_bindings(ctx, *, x, w, bias, norm) -> dict:
    """The GEMV core's inputs (bias and norm may be None: the fallbacks bind)."""
    return {"x": x, "w": w, "norm_w": norm if norm is not None else ctx.fallback("gemv.norm", 16),
            "bias": bias if bias is not None else ctx.fallback("linear.bias")}


def dispatch(ctx, kv: Kernel, s: GemvShape, *, x, w, bias, norm, residual, y, eps: float) -> list:
    """The GEMV's dispatches (norm, bias, residual may be None): one, or one a pass of max_rows rows of x
    (row_passes)."""
    bindings = {**core_bindings(ctx, x=x, w=w, bias=bias, norm=norm),
                "residual": residual if residual is not None else ctx.fallback("gemv.residual"), "y": y}
    step = kv.limits["max_rows"]
    return [ctx.dispatch(kv.name, bindings=bindings, workgroups=ctx.grid(workgroups(kv, s)), label="linear",
                         uniforms=core_uniforms(kv, s, bias=bias, norm=norm, residual=residual, eps=eps, row0=p * step),
                         constants=walk_constants(kv, pass_rows(kv, s, p * step), norm=norm))
            for p in range(row_passes(kv, s))]
