"""`embedding`: the rows of a [V, H] table that u32 token ids pick. Ids the host knows are checked before any
GPU work; ids in a GPU tensor (a decode step's sampled token) are checked by the kernel, which writes an
out-of-range id's row as zeros and reports it on the device error flag (GpuValueError from
`dev.check_errors()` or the next readback)."""

from __future__ import annotations

from typing import Any

import attrs

from wgraph import args
from wgraph.api_types import DTypeLike, Ids, TensorT
from wgraph.host_arrays import host_ids
from wgraph.errors import DtypeError, ShapeError
from wgraph.ggml_blocks import QuantizedWeight
from wgraph.ops.core import OpDef, apply, ceil_div, register, tensor_arg
from wgraph.ops.quantized import _gather_q
from wgraph.kernels.registry import kernel, select_variant
from wgraph.tensor import Tensor, TensorSpec


ROW_DTYPES = ("f32", "f16", "bf16")  # embedding's dtype=: None (the table's) or one of these


@attrs.frozen
class EmbeddingParams:
    dtype: str | None = None  # of the rows made: the table's (None), or f32 from an f16 or bf16 table


def _infer(params, specs):
    ids, table = specs
    args.optional_dtype_name("embedding", "dtype", params.dtype, ROW_DTYPES)
    if ids.dtype != "u32":
        raise DtypeError(f"embedding: ids must be u32, got {ids.dtype}")
    if len(table.shape) != 2:
        raise ShapeError(f"embedding: the table must be [vocab, hidden], got {table.shape}")
    out_dtype = params.dtype or table.dtype
    if out_dtype != table.dtype and not (out_dtype == "f32" and table.dtype in ("f16", "bf16")):
        raise DtypeError(f"embedding: dtype={params.dtype!r} from a {table.dtype} table: the rows are the table's "
                         f"dtype (dtype=None) or f32 from an f16 or bf16 table")
    if out_dtype == "bf16" and table.shape[1] % 2:
        raise ShapeError(f"embedding: bf16 rows are gathered as u32 words of two elements, so the hidden size must be "
                         f"even; got table {table.shape}")
    select_variant("embedding", table_dtype=table.dtype, output_dtype=out_dtype)
    return (TensorSpec(ids.shape + table.shape[1:], out_dtype),)


def _encode(ctx, params, inputs, outputs):
    (ids, table), (out,) = inputs, outputs
    variant = select_variant("embedding", table_dtype=table.dtype, output_dtype=out.dtype)
    k = kernel(variant)
    per_word = k.limits.get("elems_per_word", 1)  # bf16 into bf16: the kernel gathers u32 words
    vocab, hidden = table.shape[0], table.shape[1] // per_word
    n = out.size // per_word
    return [ctx.dispatch(variant, uniforms={"n": n, "hidden": max(hidden, 1), "vocab": vocab},
                         bindings={"ids": ids, "table": table, "out": out},
                         workgroups=ctx.grid(ceil_div(n, k.threads)), label="embedding")]


EMBEDDING = register(OpDef("embedding", _infer, _encode, inputs=("ids", "table")))


def embedding(ids: Ids, table: TensorT | QuantizedWeight, *, dtype: DTypeLike | None = None,
              out: TensorT | None = None) -> Any:
    """table[ids]: ids u32 [...] (ints, a numpy array, or a u32 GPU tensor), table [V, H] f32, f16 or bf16 (H
    even) -> [..., H] of the table's dtype, or `dtype="f32"` rows from an f16 or bf16 table. Host ids >= V raise
    LimitError; a GPU id >= V gives a row of zeros and sets the device error flag. A QuantizedWeight table (GGML
    blocks, `embedding_q`) gives f32 rows.

    ids: token ids: ints, a numpy integer array or a u32 GPU tensor [...] (one int is one id: rows [1, H]).
    table: [V, H] f32, f16 or bf16 (H even for bf16), or a QuantizedWeight.
    dtype: the rows' dtype: None (the table's) or "f32" from an f16 or bf16 table (numpy's and torch's spellings
        too).
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    dtype = args.optional_dtype_name("embedding", "dtype", dtype, ROW_DTYPES)
    if isinstance(table, QuantizedWeight):
        if dtype not in (None, "f32"):
            raise DtypeError(f"embedding: a quantized table's rows are f32, got dtype={dtype!r}")
        return _gather_q(ids, table, out, "embedding")
    params = EmbeddingParams(dtype)
    tensor_arg("embedding", "table", table)
    if isinstance(ids, Tensor) or getattr(ids, "_wgraph_symbol_", False) or not isinstance(table, Tensor):
        return apply(EMBEDDING, params, (ids, table), out=out)
    if len(table.shape) != 2:
        raise ShapeError(f"embedding: the table must be [vocab, hidden], got {table.shape}")
    host = host_ids(ids, table.shape[0], "embedding")
    _infer(params, (TensorSpec(host.shape, "u32"), table.spec))   # every check before the ids are uploaded
    return apply(EMBEDDING, params, (table.device.tensor(host, "u32"), table), out=out)
