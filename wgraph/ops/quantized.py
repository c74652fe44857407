"""Ops on weights held as GGML blocks (wgraph/ggml_blocks.py `QuantizedWeight`): `linear_q`, x @ W.T + b by a
GEMV that reads W's raw blocks and dequantizes them in registers, and `embedding_q`, the rows of a quantized
table that ids pick, as f32. `ops.linear` and `ops.embedding` call them when given a QuantizedWeight."""

from __future__ import annotations

import functools

import attrs

from wgraph import args
from wgraph.errors import DtypeError, PlanError, ShapeError
from wgraph.host_arrays import host_ids
from wgraph.ggml_blocks import BlockFormat, QuantizedWeight, block_format, check_matrix
from wgraph.kernels.registry import kernel, kernels_for
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.tensor import Tensor, TensorSpec


def _check_blocks(spec, fmt: BlockFormat, n: int, k: int, where: str) -> None:
    words = fmt.words(n, k)
    if spec is None or spec.dtype != "u32" or spec.shape != (words,):
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
    """The weight's format and logical shape (its blocks are the op's second input); `variant` forces a
    registry kernel instead of the planner's choice."""

    ggml_type: str
    out_features: int = attrs.field(converter=lambda d: args.integer("linear", "out_features", d, 1))
    in_features: int = attrs.field(converter=lambda d: args.integer("linear", "in_features", d, 1))
    variant: str | None = None


@attrs.frozen
class QuantLinearPlan:
    """The GEMV kernel for one shape, the row chunks it runs in (grid z), and why."""

    variant: str
    row_chunks: int
    reason: str


def _gemvs(ggml_type: str, candidates: bool = False) -> list:
    """The format's GEMV variants in registry order; tuning candidates only when asked (forcing, the bench)."""
    return [kv for kv in kernels_for("linear_q")
            if kv.facts.get("ggml_type") == ggml_type and (candidates or not kv.facts.get("candidate"))]


def _describe(kv, rows: int) -> str:
    fmt = block_format(kv.facts["ggml_type"])
    weights = fmt.block_weights // kv.const("SLICES_PER_BLOCK")
    return (f"{kv.threads} threads split each weight row into slices of {weights} weights, "
            f"{kv.limits['features_per_workgroup']} features per workgroup share each x load")


def plan_linear_q(rows: int, n: int, k: int, ggml_type: str, variant: str | None = None) -> QuantLinearPlan:
    """Among the format's GEMV variants, the first whose `max_rows` holds `rows`; more rows run in chunks of the
    variant with the most `max_rows` (each chunk reads W). A forced `variant` must be one of the format's."""
    fn = "plan_linear_q"
    rows = args.integer(fn, "rows", rows)
    n, k = args.integer(fn, "n", n, 1), args.integer(fn, "k", k, 1)
    ggml_type = block_format(ggml_type, fn).name
    if variant is not None:
        args.text(fn, "variant", variant)
    return _plan_linear_q(rows, n, k, ggml_type, variant)


@functools.lru_cache(maxsize=1024)  # a pure function of the shape and the registry: planned on every call
def _plan_linear_q(rows: int, n: int, k: int, ggml_type: str, variant: str | None) -> QuantLinearPlan:
    gemvs = _gemvs(ggml_type)
    if not gemvs:
        raise PlanError(f"linear: no GEMV kernel reads {ggml_type} blocks; the registry's linear_q kernels are "
                        f"{[kv.name for kv in kernels_for('linear_q')]}")
    if variant is not None:
        chosen = next((kv for kv in _gemvs(ggml_type, candidates=True) if kv.name == variant), None)
        if chosen is None:
            raise PlanError(f"linear: variant {variant!r} is not a {ggml_type} GEMV; those are "
                            f"{[kv.name for kv in _gemvs(ggml_type, candidates=True)]}")
        chunks = ceil_div(rows, chosen.limits["max_rows"])
        return QuantLinearPlan(chosen.name, chunks, f"forced; {rows} rows in {chunks} chunk(s) of "
                                                    f"{chosen.limits['max_rows']}: {_describe(chosen, rows)}")
    fits = [kv for kv in gemvs if rows <= kv.limits["max_rows"]]
    if fits:
        g = fits[0]
        return QuantLinearPlan(g.name, 1 if rows else 0,
                               f"{rows} rows <= {g.limits['max_rows']}: {ggml_type} GEMV (blocks dequantized in "
                               f"registers), {_describe(g, rows)}")
    g = max(gemvs, key=lambda kv: kv.limits["max_rows"])
    most = g.limits["max_rows"]
    chunks = ceil_div(rows, most)
    return QuantLinearPlan(g.name, chunks, f"{rows} rows > {most} (the GEMV's most): {chunks} chunks of {most} rows "
                                           f"in one dispatch, each reading W; {_describe(g, rows)}")


def _infer_linear_q(params: QuantLinearParams, specs):
    x, blocks, b = specs
    fmt = block_format(params.ggml_type, "linear")
    n, k = check_matrix(fmt, (params.out_features, params.in_features), "linear")
    _check_blocks(blocks, fmt, n, k, "linear")
    if len(x.shape) < 1 or x.shape[-1] != k:
        raise ShapeError(f"linear: x must be [..., {k}] for a {fmt.name} [{n}, {k}] weight, got {x.shape}")
    if x.dtype != "f32":
        raise DtypeError(f"linear: x must be f32 with a quantized weight, got {x.dtype}")
    if b is not None:
        if b.shape != (n,):
            raise ShapeError(f"linear: bias must be ({n},) for a [{n}, {k}] weight, got {b.shape}")
        if b.dtype != "f32":
            raise DtypeError(f"linear: bias must be f32, got {b.dtype}")
    if params.variant is not None:
        args.text("linear", "variant", params.variant)
    _plan_linear_q(x.size // k, n, k, fmt.name, params.variant)
    return (TensorSpec(x.shape[:-1] + (n,), "f32"),)


def _encode_linear_q(ctx, params: QuantLinearParams, inputs, outputs):
    (x, blocks, b), (y,) = inputs, outputs
    n, k = params.out_features, params.in_features
    m = x.size // k
    plan = _plan_linear_q(m, n, k, params.ggml_type, params.variant)
    ctx.chose(plan)
    if m == 0:  # nothing to compute (and x's buffer is too small to bind as vec4s)
        return []
    kv = kernel(plan.variant)
    uniforms = {"m": m, "n": n, "k": k, "has_bias": int(b is not None),
                "row_blocks": k // kv.limits["block_weights"]}
    bindings = {"x": x, "blocks": blocks, "bias": b if b is not None else ctx.fallback("linear_q.bias"), "y": y}
    gx, gy, _ = ctx.grid(ceil_div(n, kv.limits["features_per_workgroup"]))
    return [ctx.dispatch(plan.variant, uniforms=uniforms, bindings=bindings, workgroups=(gx, gy, plan.row_chunks),
                         label="linear_q")]


LINEAR_Q = register(OpDef("linear_q", _infer_linear_q, _encode_linear_q, inputs=("x", "w.blocks", "b?")))


def linear_q(x, w: QuantizedWeight, b=None, *, out=None, variant: str | None = None):
    """`x @ W.T + b` for a QuantizedWeight W [out, in] (its blocks a u32 Tensor or graph value): x f32 [..., in],
    b f32 [out] or None; f32 accumulation and output. `variant` forces one of the format's GEMV kernels."""
    w = _weight(w, "linear", "w")
    if variant is not None:
        args.text("linear", "variant", variant)  # a registry name: the plan names the choices
    return apply(LINEAR_Q, QuantLinearParams(w.ggml_type, w.out_features, w.in_features, variant),
                 (x, w.blocks, b), out=out)


# ---- embedding_q ----

@attrs.frozen
class QuantEmbeddingParams:
    """The table's format and logical shape [vocab, hidden] (its blocks are the op's second input)."""

    ggml_type: str
    vocab: int = attrs.field(converter=lambda d: args.integer("embedding", "vocab", d, 1))
    hidden: int = attrs.field(converter=lambda d: args.integer("embedding", "hidden", d, 1))


def _embedding_variant(ggml_type: str) -> str:
    for kv in kernels_for("embedding_q"):
        if kv.facts.get("ggml_type") == ggml_type:
            return kv.name
    raise PlanError(f"embedding: no kernel gathers {ggml_type} rows; the registry's embedding_q kernels are "
                    f"{[kv.name for kv in kernels_for('embedding_q')]}")


def _infer_embedding_q(params: QuantEmbeddingParams, specs):
    ids, blocks = specs
    fmt = block_format(params.ggml_type, "embedding")
    v, h = check_matrix(fmt, (params.vocab, params.hidden), "embedding")
    _check_blocks(blocks, fmt, v, h, "embedding")
    if ids.dtype != "u32":
        raise DtypeError(f"embedding: ids must be u32, got {ids.dtype}")
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


def embedding_q(ids, table: QuantizedWeight, *, out=None):
    """table[ids] as f32 [..., hidden] for a QuantizedWeight table [vocab, hidden]: ids as in `ops.embedding`
    (host ids >= vocab raise LimitError; a GPU id >= vocab gives a row of zeros and sets the device error flag)."""

    table = _weight(table, "embedding", "table")
    params = QuantEmbeddingParams(table.ggml_type, table.out_features, table.in_features)
    if isinstance(ids, Tensor) or getattr(ids, "_wgraph_symbol_", False) or not isinstance(table.blocks, Tensor):
        return apply(EMBEDDING_Q, params, (ids, table.blocks), out=out)
    host = host_ids(ids, table.out_features, "embedding")
    return apply(EMBEDDING_Q, params, (table.blocks.device.tensor(host, "u32"), table.blocks), out=out)

