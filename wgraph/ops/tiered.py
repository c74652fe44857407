"""Tiered attention: one softmax over a cold part (contiguous or paged; f16, or int8/int4 from kv_quantize) and a
hot ring of the newest `hot_window` rows (f16). Key j sits at position j; of kv_len keys the newest
min(kv_len, hot_window) are hot at ring slot j % hot_window and the rest are cold at row j (or its page).
Queries are the last S positions (query i at kv_len - S + i). kv_len is an int or a u32 GPU tensor."""

from __future__ import annotations

import math
from typing import Any

import attrs

from wgraph import args
from wgraph.api_types import TensorT
from wgraph.errors import DtypeError, LimitError, ShapeError
from wgraph.ops.attention import require_causal, window_of
from wgraph.ops.attention_loops import check_decode_loop
from wgraph.ops.core import OpDef, apply, register, tensor_arg
from wgraph.ops.kv_cache import _check_packed, quant_format, select_variant
from wgraph.kernels.registry import kernel
from wgraph.tensor import Tensor, TensorSpec, require


@attrs.frozen
class TieredParams:
    kv_len: int | None  # None: read from the kv_len tensor input
    hot_window: int
    page_size: int
    causal: bool
    sliding_window: int = 0
    softcap: float = 0.0
    scale: float | None = None
    mode: str | None = None  # None: f16 cold; "int8"/"int4": quantized cold
    window_right: int = -1   # FlashAttention's window_size[1]: -1 unbounded
    return_lse: bool = False


def _check_fields(op: str, p: TieredParams) -> None:
    """Every field of `p` by its rule (args.py), for params from a graph file or Program.update."""
    args.optional_integer(op, "kv_len", p.kv_len)
    args.integer(op, "hot_window", p.hot_window)
    args.integer(op, "page_size", p.page_size)
    args.flag(op, "causal", p.causal)
    args.integer(op, "sliding_window", p.sliding_window)
    args.normal_real(op, "softcap", p.softcap, or_zero=True)
    args.optional_real(op, "scale", p.scale)
    args.choice(op, "mode", p.mode, (None, "int8", "int4"))
    args.integer(op, "window_right", p.window_right, -1, args.I32_MAX)
    args.flag(op, "return_lse", p.return_lse)


def _op_name(params) -> str:
    return "tiered_attention" if params.mode is None else "tiered_quant_attention"


def _variant(params, q_dtype: str) -> str:
    if params.mode is None:
        return select_variant("tiered_attention", q_dtype=q_dtype)
    return select_variant("tiered_quant_attention", q_dtype=q_dtype, mode=params.mode)


def _infer(params: TieredParams, specs):
    q, hot_k, hot_v, cold_k, cold_v, k_scale, v_scale, table, len_t = specs
    op = _op_name(params)
    _check_fields(op, params)
    if len(q.shape) != 3:
        raise ShapeError(f"{op}: q must be [S, Hq, D], got {q.shape}")
    S, hq, dim = q.shape
    if dim == 0:   # else 1 / sqrt(0), the default scale: a ZeroDivisionError
        raise ShapeError(f"{op}: head_dim must be >= 1, got q {q.shape}")
    variant = _variant(params, q.dtype)
    max_d = kernel(variant).limits["max_head_dim"]
    if dim > max_d:
        raise LimitError(f"{op}: head_dim {dim} is above the {variant} kernel's max_head_dim {max_d}")
    if len(hot_k.shape) != 3 or hot_k.shape != hot_v.shape:
        raise ShapeError(f"{op}: hot_k {hot_k.shape} and hot_v {hot_v.shape} must both be [hot_window, Hkv, D]")
    w, hkv, dk = hot_k.shape
    if dk != dim:
        raise ShapeError(f"{op}: hot K/V head_dim {dk} differs from q's {dim}")
    if hot_k.dtype != "f16" or hot_v.dtype != "f16":
        raise DtypeError(f"{op}: the hot ring must be f16, got {hot_k.dtype}/{hot_v.dtype}")
    if hkv == 0 or hq % hkv:
        raise ShapeError(f"{op}: q heads {hq} must be a multiple of kv heads {hkv}")
    if params.hot_window <= 0 or params.hot_window > w:
        raise LimitError(f"{op}: hot_window {params.hot_window} must be in 1..{w} (the hot ring's rows)")
    if params.mode is None:
        for name, c in (("cold_k", cold_k), ("cold_v", cold_v)):
            if len(c.shape) != 3 or c.shape[1:] != (hkv, dim):
                raise ShapeError(f"{op}: {name} {c.shape} must be [rows, {hkv}, {dim}]")
            if c.dtype != "f16":
                raise DtypeError(f"{op}: {name} must be f16, got {c.dtype}")
    else:
        _, vpw, _ = quant_format(params.mode)
        rows = cold_k.shape[0] if cold_k.shape else 0
        _check_packed(params.mode, cold_k, k_scale, (rows, hkv, dim), op)
        _check_packed(params.mode, cold_v, v_scale, (rows, hkv, dim), op)
    cold_rows = cold_k.shape[0]
    if cold_k.shape[0] != cold_v.shape[0]:
        raise ShapeError(f"{op}: cold_k has {cold_k.shape[0]} rows, cold_v {cold_v.shape[0]}")
    if table is not None:
        require(table, "u32", len(table.shape) == 1,
                f"{op}: page_table must be a 1-D u32 tensor, got {table.shape} {table.dtype}")
        if params.page_size <= 0 or cold_rows % params.page_size:
            raise ShapeError(f"{op}: a paged cold part of {cold_rows} rows needs a page_size that divides it, "
                             f"got {params.page_size}")
        cold_capacity = table.shape[0] * params.page_size
    else:
        cold_capacity = cold_rows
    if len_t is not None:
        len_t.check_u32_scalar(f"{op}: kv_len tensor must be u32 with one value, got {len_t.shape} {len_t.dtype}")
    else:
        n = params.kv_len
        if n is None:  # params from a graph file or Program.update: None reads a kv_len tensor, and there is none
            raise ShapeError(f"{op}: kv_len must be an int or a u32 tensor with one value, got nothing")
        if n > args.I32_MAX:
            raise LimitError(f"{op}: kv_len {n} is above {args.I32_MAX}: the kernels place the queries at positions "
                             f"kv_len - S + i in i32")
        if n < S:
            raise ShapeError(f"{op}: kv_len {n} is smaller than the {S} queries (queries are the last positions)")
        cold_len = n - min(n, params.hot_window)
        if cold_len > cold_capacity:
            raise LimitError(f"{op}: kv_len {n} with hot_window {params.hot_window} puts {cold_len} rows in the cold "
                             f"part, which holds {cold_capacity}")
    out = TensorSpec((S, hq, dim), kernel(variant).output_dtype)
    return (out, TensorSpec((hq, S), "f32")) if params.return_lse else (out,)


def _encode(ctx, params: TieredParams, inputs, outputs):
    q, hot_k, hot_v, cold_k, cold_v, k_scale, v_scale, table, len_t = inputs
    out = outputs[0]
    lse = outputs[1] if params.return_lse else ctx.fallback("tiered.lse")
    S, hq, dim = q.shape
    variant = _variant(params, q.dtype)
    scale = params.scale if params.scale is not None else 1.0 / math.sqrt(dim)
    uniforms = {
        "num_heads": hq, "num_kv_heads": hot_k.shape[1], "head_dim": dim, "seq_len": S,
        "kv_len": params.kv_len or 0, "use_len_buf": int(len_t is not None), "hot_window": params.hot_window,
        # a GPU kv_len above it is clamped and reported; past 2^31 - 1 the i32 query positions would go negative
        "len_cap": min(args.I32_MAX, params.hot_window + (table.shape[0] * params.page_size if table is not None
                                                          else cold_k.shape[0])),
        "cold_layout": int(table is not None), "cold_page_size": max(1, params.page_size),
        "cold_pages": cold_k.shape[0] // max(1, params.page_size),
        "causal": int(params.causal), "sliding_window": params.sliding_window, "scale": scale,
        "softcap": params.softcap, "window_right": params.window_right, "write_lse": int(params.return_lse),
    }
    bindings = {"q": q, "hot_k": hot_k, "hot_v": hot_v, "cold_k": cold_k, "cold_v": cold_v, "out": out, "lse": lse,
                "page_table": table if table is not None else ctx.fallback("tiered.page_table"),
                "len_buf": len_t if len_t is not None else ctx.fallback("tiered.kv_len")}
    if params.mode is not None:
        bindings.update(cold_k_scale=k_scale, cold_v_scale=v_scale)
    check_decode_loop(kernel(variant), dim, params.kv_len if len_t is None else uniforms["len_cap"], ctx.caps,
                      "tiered_attention")
    return [ctx.dispatch(variant, uniforms=uniforms, bindings=bindings, workgroups=(hq, S, 1), label=variant)]


TIERED = register(OpDef("tiered_attention", _infer, _encode,
                        inputs=("q", "hot_k", "hot_v", "cold_k", "cold_v", "cold_k_scale?", "cold_v_scale?",
                                "page_table?", "kv_len?")))


def _params(op, kv_len, hot_window, hot_k, page_table, page_size, causal, sliding_window, softcap, scale, mode,
            window, return_lse):
    len_t = kv_len if isinstance(kv_len, Tensor) or getattr(kv_len, "_wgraph_symbol_", False) else None
    if len_t is None and not args.is_int(kv_len):
        raise args.fail(op, "kv_len", kv_len, f"an integer in [0, {args.U32_MAX}] or a u32 GPU tensor")
    page_size = args.integer(op, "page_size", page_size)
    if page_table is not None and page_size <= 0:
        raise args.fail(op, "page_size", page_size, "an integer in [1, 4294967295] with a page_table")
    hot_window = args.optional_integer(op, "hot_window", hot_window, 1)
    left, right = window_of(window, sliding_window, op)
    params = TieredParams(None if len_t is not None else args.integer(op, "kv_len", kv_len),
                          hot_window or tensor_arg(op, "hot_k", hot_k).shape[0], page_size,
                          require_causal(op, causal), left + 1, args.normal_real(op, "softcap", softcap, or_zero=True),
                          args.optional_real(op, "scale", scale), mode, right, args.flag(op, "return_lse", return_lse))
    return params, len_t


def tiered_attention(q: TensorT, hot_k: TensorT, hot_v: TensorT, cold_k: TensorT, cold_v: TensorT, *,
                     kv_len: int | TensorT, causal: bool, hot_window: int | None = None,
                     page_table: TensorT | None = None, page_size: int = 0, sliding_window: int = 0,
                     softcap: float = 0.0, scale: float | None = None, window: tuple[int, int] = (-1, -1),
                     return_lse: bool = False, out: TensorT | None = None) -> Any:
    """Attention of q over an f16 hot ring of the newest keys and an f16 cold part of the older ones, one softmax
    over both (docs/kv_cache.md). Returns out [S, Hq, D] in q's dtype, or (out, lse) with return_lse.

    q: queries [S, Hq, D], f16 (f16 out) or f32 (f32 out).
    hot_k, hot_v: the ring [hot_window, Hkv, D] f16: key j (of the newest) at slot j % hot_window.
    cold_k, cold_v: the cold part [rows, Hkv, D] f16: key j at row j (or its page); it must hold
        kv_len - hot_window rows.
    kv_len: how many keys there are in all (hot and cold): an int or a u32 tensor with one value read at
        dispatch time; the queries are the last S positions (query i at kv_len - S + i).
    causal: required, True or False: masks keys after the query's position.
    hot_window: the ring's slot count (the newest min(kv_len, hot_window) keys are hot); None: hot_k's rows.
    page_table: a 1-D u32 tensor mapping the cold part's pages (cold key j at row page_table[j // page_size] *
        page_size + j % page_size); None: the cold part is contiguous (key j at row j).
    page_size: rows per cold page, with page_table only.
    sliding_window: w > 0 masks keys at or before query_pos - w; 0 is off.
    softcap: c > 0 caps the scaled scores as c * tanh(s / c); 0 is off.
    scale: the scores' factor; None: 1 / sqrt(D).
    window: FlashAttention's window_size (left, right), -1 unbounded, as in wg.ops.attention.
    return_lse: also return lse [Hq, S] f32, the log-sum-exp of each query's visible scores.
    out: a tensor (in a graph: a state value) of the output's shape and dtype to write into."""
    params, len_t = _params("tiered_attention", kv_len, hot_window, hot_k, page_table, page_size, causal,
                            sliding_window, softcap, scale, None, window, return_lse)
    return apply(TIERED, params, (q, hot_k, hot_v, cold_k, cold_v, None, None, page_table, len_t), out=out)


def tiered_quant_attention(q: TensorT, hot_k: TensorT, hot_v: TensorT, cold_k: TensorT, cold_v: TensorT,
                           cold_k_scale: TensorT, cold_v_scale: TensorT, *, mode: str, kv_len: int | TensorT,
                           causal: bool, hot_window: int | None = None, page_table: TensorT | None = None,
                           page_size: int = 0, sliding_window: int = 0, softcap: float = 0.0,
                           scale: float | None = None, window: tuple[int, int] = (-1, -1), return_lse: bool = False,
                           out: TensorT | None = None) -> Any:
    """Attention of f32 q over an f16 hot ring and an int8/int4 cold part (kv_quantize's packed + scales), one
    softmax over both. Returns out [S, Hq, D] f32, or (out, lse) with return_lse.

    q: queries [S, Hq, D] f32.
    hot_k, hot_v: the ring [hot_window, Hkv, D] f16.
    cold_k, cold_v: the cold part's packed u32 data [rows, Hkv, D / values per word] (kv_quantize's `packed`).
    cold_k_scale, cold_v_scale: their f16 scales [rows, Hkv] (kv_quantize's `scales`).
    mode: "int8" or "int4", the packing of cold_k / cold_v (checked against their shapes).
    kv_len: how many keys there are in all (hot and cold): an int or a u32 tensor with one value read at
        dispatch time; the queries are the last S positions (query i at kv_len - S + i).
    causal: required, True or False: masks keys after the query's position.
    hot_window: the ring's slot count (the newest min(kv_len, hot_window) keys are hot); None: hot_k's rows.
    page_table: a 1-D u32 tensor mapping the cold part's pages (cold key j at row page_table[j // page_size] *
        page_size + j % page_size); None: the cold part is contiguous (key j at row j).
    page_size: rows per cold page, with page_table only.
    sliding_window: w > 0 masks keys at or before query_pos - w; 0 is off.
    softcap: c > 0 caps the scaled scores as c * tanh(s / c); 0 is off.
    scale: the scores' factor; None: 1 / sqrt(D).
    window: FlashAttention's window_size (left, right), -1 unbounded, as in wg.ops.attention.
    return_lse: also return lse [Hq, S] f32, the log-sum-exp of each query's visible scores.
    out: a tensor (in a graph: a state value) of the output's shape and dtype to write into."""
    mode = args.choice("tiered_quant_attention", "mode", mode, ("int8", "int4"))
    tensor_arg("tiered_quant_attention", "cold_k_scale", cold_k_scale)
    tensor_arg("tiered_quant_attention", "cold_v_scale", cold_v_scale)
    params, len_t = _params("tiered_quant_attention", kv_len, hot_window, hot_k, page_table, page_size, causal,
                            sliding_window, softcap, scale, mode, window, return_lse)
    return apply(TIERED, params, (q, hot_k, hot_v, cold_k, cold_v, cold_k_scale, cold_v_scale, page_table, len_t),
                 out=out)
