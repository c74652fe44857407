"""`sdpa(query, key, value, attn_mask=None, is_causal=False, scale=None, enable_gqa=False)`: torch's
`scaled_dot_product_attention` (signature and semantics) on wgraph tensors of layout [..., H, L, D].

How it runs: the batch axes fold into the heads ([..., H, L, D] is [B*H, L, D], a view), one `transpose01`
dispatch per input makes attention's [L, B*H, D] (q head b*Hq + h then reads kv head b*Hkv + h // group, so
GQA folds too), the attention op runs, and one `transpose01` turns the output back. Causal is top-left, as
torch: `attention(causal=True, start_pos=0)`. With `attn_mask`, the `sdpa_masked` kernel runs instead.

Cost: the four transposes each read and write one tensor once (memory-bound copies; a view, no copy, where
an axis is 1: one query (decode) or one head). `sdpa_masked` is simple,
not fast: one workgroup per (query, head), each key's q.k computed by one thread from global memory (no K/V
tiles in workgroup memory), so it reads K and V once per query row; a host-data mask (numpy, torch CPU) is
uploaded on every call (pass a GPU tensor to reuse one), booleans as u32."""

from __future__ import annotations

import math

import attrs
import numpy as np
from numpy.typing import ArrayLike

from wgraph import args
from wgraph.api_types import TensorT
from wgraph.errors import DeviceError, DtypeError, LimitError, ShapeError, UnsupportedError, WgraphError
from wgraph.host_arrays import host_array, host_view
from wgraph.ops.attention import attention, attention_plan
from wgraph.ops.cpu_limits import check_cpu_loops
from wgraph.ops.core import OpDef, apply, ceil_div, register, tensor_arg
from wgraph.ops.dense import reshape
from wgraph.kernels.registry import kernel, select_variant
from wgraph.tensor import Tensor, TensorSpec

# Iterations lavapipe counts per key tile beyond the kernel's own loop trips. Measured on Mesa 22.3.6 (one query,
# one head, every key taking part; first wrong key count): D=64 27264 keys, D=128 14912, D=256 7808, i.e. 10 to
# 13 more per tile than the trips counted below; 16 keeps the check on the safe side of all three.
CPU_TILE_OVERHEAD = 16


# ---- transpose01: [A, B, D] -> [B, A, D] ----

@attrs.frozen
class Transpose01Params:
    pass


def _infer_transpose01(params, specs):
    (x,) = specs
    if len(x.shape) != 3:
        raise ShapeError(f"transpose01: x must be [A, B, D], got {x.shape}")
    select_variant("transpose01", output_dtype=x.dtype)
    a, b, d = x.shape
    return (TensorSpec((b, a, d), x.dtype),)


def _encode_transpose01(ctx, params, inputs, outputs):
    (x,), (y,) = inputs, outputs
    if x.size == 0:
        return []
    variant = select_variant("transpose01", output_dtype=x.dtype)
    a, b, d = x.shape
    return [ctx.dispatch(variant, uniforms={"a": a, "b": b, "d": d, "n": x.size}, bindings={"x": x, "y": y},
                         workgroups=ctx.grid(ceil_div(x.size, kernel(variant).threads)), label="transpose01")]


TRANSPOSE01 = register(OpDef("transpose01", _infer_transpose01, _encode_transpose01, inputs=("x",)))


def transpose01(x: TensorT, *, out: TensorT | None = None) -> TensorT:
    """x [A, B, D] (f32 or f16) -> [B, A, D], a copy: the first two axes swapped.

    x: [A, B, D] f32 or f16.
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    return apply(TRANSPOSE01, Transpose01Params(), (x,), out=out)


# ---- sdpa_masked: attention of [L, B*Hq, D] with a strided mask ----

@attrs.frozen
class SdpaMaskedParams:
    heads: int        # q heads per batch entry
    kv_group: int     # q heads per kv head
    scale: float
    mask_bool: bool   # u32 booleans (nonzero takes part); else f32 added to the scores
    mask_strides: tuple[int, int, int, int]  # (batch, head, query, key) in mask elements; 0 on broadcast axes


def _check_device_limits(caps, seq_q: int, folded_heads: int, seq_k: int, head_dim: int, dtype: str):
    """LimitError where sdpa_masked's grid (folded heads x queries) is past the device's per-dimension limit,
    or where one invocation would loop past lavapipe's limit (the kernel's loop trips: the q load, per key tile
    the score, reductions and P.V loops plus CPU_TILE_OVERHEAD, the store)."""
    limit = caps.max_workgroups_per_dim
    if max(seq_q, folded_heads) > limit:
        raise LimitError(f"sdpa: attn_mask runs one workgroup per (head, query): {folded_heads} x {seq_q} is past "
                         f"the device's {limit} workgroups per dimension")
    k = kernel(select_variant("sdpa_masked", output_dtype=dtype))
    wg, acc = k.threads, k.limits["max_head_dim"] // k.threads
    per_tile = head_dim + 2 * int(math.log2(wg)) + acc + ceil_div(head_dim, wg) * wg + CPU_TILE_OVERHEAD
    n = ceil_div(head_dim, wg) + 2 * acc + ceil_div(seq_k, wg) * per_tile
    check_cpu_loops(caps, n, f"sdpa: attn_mask over {seq_k} keys at head_dim {head_dim}")


def _infer_masked(params: SdpaMaskedParams, specs):
    q, k, v, mask = specs
    args.integer("sdpa", "heads", params.heads, 1)
    args.integer("sdpa", "kv_group", params.kv_group, 1)
    args.real("sdpa", "scale", params.scale)
    args.flag("sdpa", "mask_bool", params.mask_bool)
    if not (isinstance(params.mask_strides, tuple) and len(params.mask_strides) == 4):
        raise args.fail("sdpa", "mask_strides", params.mask_strides, "a tuple of 4 integers")
    for name, stride in zip(("batch", "head", "query", "key"), params.mask_strides):
        args.integer("sdpa", f"mask_strides ({name})", stride)
    # sdpa() makes these specs, but a graph file's sdpa_masked node comes here as written: a short v, another
    # head_dim, dtype or mask kind were read past their ends or as the wrong type, a silently wrong output
    for name, s in (("query", q), ("key", k), ("value", v)):
        if len(s.shape) != 3:
            raise ShapeError(f"sdpa: sdpa_masked's {name} must be [rows, folded heads, head_dim], got {s.shape}")
    if v.shape != k.shape or k.shape[2] != q.shape[2]:
        raise ShapeError(f"sdpa: sdpa_masked's key {k.shape} and value {v.shape} must have one shape, and the "
                         f"head_dim of query {q.shape}")
    if not q.dtype == k.dtype == v.dtype:
        raise DtypeError(f"sdpa: query, key and value must share one dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    mask_dtype = "u32" if params.mask_bool else "f32"
    if mask.dtype != mask_dtype:
        raise DtypeError(f"sdpa: mask_bool={params.mask_bool} reads attn_mask as {mask_dtype}, got {mask.dtype}")
    L, folded, D = q.shape
    variant = select_variant("sdpa_masked", output_dtype=q.dtype)
    limit = kernel(variant).limits["max_head_dim"]
    if D > limit:
        raise LimitError(f"sdpa: head_dim {D} with attn_mask is above the sdpa_masked kernel's limit {limit}")
    S, kv_folded, _ = k.shape
    if kv_folded * params.kv_group != folded or folded % params.heads:
        raise ShapeError(f"sdpa: q {q.shape} and k {k.shape} do not fold {params.heads} heads in groups of "
                         f"{params.kv_group}")
    b, h, i, j = params.mask_strides
    last = (folded // params.heads - 1) * b + (params.heads - 1) * h + (L - 1) * i + (S - 1) * j
    if L and S and folded and last >= mask.size:
        raise ShapeError(f"sdpa: attn_mask of {mask.size} elements is too small for strides {params.mask_strides}")
    return (TensorSpec(q.shape, q.dtype),)


def _encode_masked(ctx, params: SdpaMaskedParams, inputs, outputs):
    q, k, v, mask = inputs
    (out,) = outputs
    L, folded, D = q.shape
    S = k.shape[0]
    if out.size == 0:
        return []
    variant = select_variant("sdpa_masked", output_dtype=q.dtype)
    _check_device_limits(ctx.caps, L, folded, S, D, q.dtype)
    if S == 0:  # no keys: nothing is read, but the bindings must not be empty
        k = v = mask = ctx.fallback("sdpa.no_kv", 64)
    uniforms = {"seq_q": L, "seq_k": S, "heads": params.heads, "folded_heads": folded,
                "kv_group": params.kv_group, "head_dim": D, "scale": params.scale,
                "mask_bool": int(params.mask_bool), "mask_stride_b": params.mask_strides[0],
                "mask_stride_h": params.mask_strides[1], "mask_stride_q": params.mask_strides[2],
                "mask_stride_k": params.mask_strides[3]}
    return [ctx.dispatch(variant, uniforms=uniforms, bindings={"q": q, "k": k, "v": v, "mask": mask, "out": out},
                         workgroups=(folded, L, 1), label="sdpa_masked")]


SDPA_MASKED = register(OpDef("sdpa_masked", _infer_masked, _encode_masked,
                             inputs=("query", "key", "value", "attn_mask")))


# ---- the torch-shaped entry point ----

def _symbolic(x) -> bool:
    return getattr(x, "_wgraph_symbol_", False)


def _one_home(named: tuple) -> None:
    """The (name, input) pairs are Tensors of one device or values of one graph. Checked before the first
    transpose: the op that mixed them raised only after the other inputs' transposes had run on their devices (or
    been added to a graph as nodes nothing reads)."""
    from wgraph.graph.nodes import GraphError   # here: wgraph.graph imports the ops

    first_name, first = named[0]
    for name, x in named[1:]:
        if _symbolic(x) != _symbolic(first):
            (vname, v), tname = ((name, x), first_name) if _symbolic(x) else ((first_name, first), name)
            raise GraphError(f"sdpa: {vname} is a value of graph {v.graph.name!r} but {tname} is a Tensor; in a graph "
                             f"every input must be a value (g.input, g.state or g.const)")
        if _symbolic(x) and x.graph is not first.graph:
            raise GraphError(f"sdpa: {name} belongs to graph {x.graph.name!r} and {first_name} to graph "
                             f"{first.graph.name!r}")
        if not _symbolic(x) and x.device is not first.device:
            raise DeviceError(f"sdpa: inputs live on different devices ({first.device!r} and {x.device!r})")


def _mask_input(attn_mask, query, batch: tuple, target: tuple):
    """(mask tensor, graph value or flat host array, is boolean, strides (batch, head, query, key)) for a mask
    broadcastable to `target` = batch + (Hq, L, S)."""
    if isinstance(attn_mask, Tensor) or _symbolic(attn_mask):
        if attn_mask.dtype not in ("f32", "u32"):
            raise DtypeError(f"sdpa: a GPU attn_mask is f32 (added to the scores) or u32 (a boolean: nonzero "
                             f"takes part), got {attn_mask.dtype}")
        shape, data, boolean = tuple(attn_mask.shape), attn_mask, attn_mask.dtype == "u32"
    else:
        if _symbolic(query):
            raise ShapeError("sdpa: in a graph, attn_mask must be a graph value (g.const or g.input), not host data")
        arr = host_view(attn_mask, "sdpa: attn_mask")
        boolean = arr.dtype == bool
        if boolean:
            arr = arr.astype(np.uint32)
        else:
            if arr.dtype.kind not in "iu":   # an integer mask skips host_array, whose message offers u32 / i32 storage
                arr = host_array(arr, where="sdpa: attn_mask")  # float64 raises here as everywhere
            if arr.dtype == np.float16:
                arr = arr.astype(np.float32)  # exact: f16 values are f32 values
            if arr.dtype != np.float32:
                raise DtypeError(f"sdpa: attn_mask is bool (True takes part) or float (added), got {arr.dtype}; a 0 / "
                                 f"1 mask is mask.astype(bool)")
        shape, data = arr.shape, arr
    n = len(target)
    scores = target[n - len(query.shape):]   # a 2-D query's scores are [L, S]: target's head axis is sdpa's own
    if len(shape) > len(scores):   # torch refuses it too (its in-place add cannot grow the scores)
        raise ShapeError(f"sdpa: attn_mask {shape} has more axes than the scores {scores}")
    padded = (1,) * (n - len(shape)) + tuple(shape)
    if any(m not in (1, t) for m, t in zip(padded, target)):
        raise ShapeError(f"sdpa: attn_mask {shape} does not broadcast to the scores {scores} ([..., Hq, L, S])")
    mask_batch, nb = padded[:-3], len(batch)
    if all(m == 1 for m in mask_batch):
        batch_size = 1
    elif mask_batch == batch:
        batch_size = math.prod(batch)
    elif isinstance(data, np.ndarray):  # some batch axes broadcast, others not: expand them on the host
        data = np.broadcast_to(data.reshape(padded), batch + padded[nb:])
        batch_size = math.prod(batch)
    else:   # a graph takes no host mask: there the expanded array goes in as a g.const
        where, instead = (("a graph's", "g.const of the expanded array") if _symbolic(data)
                          else ("a GPU", "or pass it as host data"))
        raise ShapeError(f"sdpa: {where} attn_mask {shape} broadcasts over some batch axes of {batch} but not all; "
                         f"expand it to {batch + padded[nb:]} ({instead})")
    hm, lm, sm = padded[-3:]
    strides = (hm * lm * sm if batch_size > 1 else 0, lm * sm if hm > 1 else 0, sm if lm > 1 else 0,
               1 if sm > 1 else 0)
    if isinstance(data, np.ndarray):  # uploaded by sdpa once every check has passed
        data = np.ascontiguousarray(data).reshape(-1)
    return data, boolean, strides


def sdpa(query: TensorT, key: TensorT, value: TensorT, attn_mask: TensorT | ArrayLike | None = None,
         dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
         enable_gqa: bool = False) -> TensorT:
    """torch.nn.functional.scaled_dot_product_attention on wgraph tensors (or graph values), f32 or f16:
    query [..., Hq, L, D], key/value [..., Hkv, S, D] -> [..., Hq, L, D]. is_causal: top-left (query i sees
    keys 0..i), as torch. attn_mask: bool (True takes part) or float (added to the scores), broadcastable to
    [..., Hq, L, S]; host data or a GPU tensor (f32 added, u32 boolean). enable_gqa: Hq a multiple of Hkv.

    query: [..., Hq, L, D].
    key, value: [..., Hkv, S, D].
    attn_mask: None, or a mask broadcastable to [..., Hq, L, S] (host data or a GPU tensor).
    dropout_p: 0.0 only (torch's argument, in torch's place: inference attention has no dropout).
    is_causal: top-left causal masking (not with attn_mask).
    scale: the scores' factor; None: 1 / sqrt(D). A scale so large that every score a query sees is below -1e38
        (1e37 can do it, with either sign) gives that query zeros where torch keeps its highest score's value
        row: the prefill kernels' masked score (docs/attention.md, "Output").
    enable_gqa: allow Hq a multiple of Hkv (grouped-query attention).
    """
    if args.real("sdpa", "dropout_p", dropout_p, 0.0, 1.0) != 0.0:
        raise UnsupportedError(f"sdpa: dropout_p={dropout_p}: wgraph's attention has no dropout (inference); pass 0.0")
    is_causal = args.flag("sdpa", "is_causal", is_causal)
    enable_gqa = args.flag("sdpa", "enable_gqa", enable_gqa)
    scale = args.optional_real("sdpa", "scale", scale)
    for name, x in (("query", query), ("key", key), ("value", value)):
        tensor_arg("sdpa", name, x)
        if len(x.shape) < 2:
            raise ShapeError(f"sdpa: {name} must be [..., heads, rows, head_dim], got {x.shape}")
    _one_home((("query", query), ("key", key), ("value", value))
              + ((("attn_mask", attn_mask),) if isinstance(attn_mask, Tensor) or _symbolic(attn_mask) else ()))
    if key.shape != value.shape:
        raise ShapeError(f"sdpa: key {key.shape} and value {value.shape} differ; they must have one shape (the same "
                         f"keys and heads, as torch, and one head_dim: wgraph's kernels need it)")
    if not query.dtype == key.dtype == value.dtype or query.dtype not in ("f32", "f16"):
        raise DtypeError(f"sdpa: query, key and value must share one dtype, f32 or f16; got {query.dtype}, "
                         f"{key.dtype}, {value.dtype}")
    q_shape, k_shape = tuple(query.shape), tuple(key.shape)
    if len(k_shape) != len(q_shape) or k_shape[:-3] != q_shape[:-3]:
        raise ShapeError(f"sdpa: query {tuple(query.shape)} and key {tuple(key.shape)} must have the same batch axes")
    if len(q_shape) == 2:  # [L, D]: one head
        q_shape, k_shape = (1,) + q_shape, (1,) + k_shape
    batch, (hq, L, D) = q_shape[:-3], q_shape[-3:]
    hkv, S, dk = k_shape[-3:]
    if dk != D:
        raise ShapeError(f"sdpa: query head_dim {D} != key head_dim {dk}")
    if min(hq, hkv, D) < 1:   # before the GQA rule: 0 kv heads is no case for enable_gqa=True
        raise ShapeError(f"sdpa: heads and head_dim must be at least 1; got query {tuple(query.shape)} and key "
                         f"{tuple(key.shape)}")
    if hq != hkv and not enable_gqa:
        raise ShapeError(f"sdpa: query has {hq} heads and key {hkv}; pass enable_gqa=True for grouped-query "
                         f"attention (as torch)")
    if hq % hkv:
        raise ShapeError(f"sdpa: query heads {hq} is not a multiple of key/value heads {hkv}")
    if is_causal and attn_mask is not None:
        raise WgraphError("sdpa: pass either attn_mask or is_causal=True, not both (torch's documented rule; its "
                          "2.13 CPU kernel combines them instead); fold the causal mask into attn_mask")
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    B = math.prod(batch)
    now = isinstance(query, Tensor)
    if attn_mask is not None:   # checked with an empty batch too: a mask torch refuses is refused there as well
        mask, boolean, strides = _mask_input(attn_mask, query, batch, batch + (hq, L, S))
    if B == 0 and now:   # an empty batch: an empty output, as torch
        return query.device.empty(tuple(query.shape), query.dtype)
    # every check before the first transpose runs: an error leaves no GPU work behind
    specs = (TensorSpec((L, B * hq, D), query.dtype), TensorSpec((S, B * hkv, D), key.dtype))
    if attn_mask is None:
        if now:
            attention_plan(specs[0], specs[1], specs[1], caps=query.device.caps, causal=is_causal,
                           start_pos=0, scale=scale)
    else:
        mask_dtype = "u32" if boolean else "f32"
        params = SdpaMaskedParams(hq, hq // hkv, scale, boolean, strides)
        _infer_masked(params, (*specs, specs[1], TensorSpec(tuple(mask.shape), mask_dtype)))
        if now:
            _check_device_limits(query.device.caps, L, B * hq, S, D, query.dtype)
        if isinstance(mask, np.ndarray):
            mask = query.device.tensor(mask, mask_dtype, label="sdpa.attn_mask")
    q3 = _swap(query, B * hq, L, D)      # [L, B*Hq, D]
    k3 = _swap(key, B * hkv, S, D)       # [S, B*Hkv, D]
    v3 = _swap(value, B * hkv, S, D)
    if attn_mask is None and B == 0:   # a graph's empty batch (eager returned above): attention takes no 0 heads
        o3 = q3
    elif attn_mask is None:
        o3 = attention(q3, k3, v3, causal=is_causal, start_pos=0, scale=scale)
    else:
        o3 = apply(SDPA_MASKED, params, (q3, k3, v3, mask))
    return reshape(_swap(o3, L, B * hq, D), tuple(query.shape))


def _swap(x, a: int, b: int, d: int):
    """x viewed as [a, b, d] -> [b, a, d]: a view when a or b is 1 (decode, one head), else a transpose01 copy."""
    if a == 1 or b == 1:
        return reshape(x, (b, a, d))
    return transpose01(reshape(x, (a, b, d)))
