"""`decode_advance_batched`: `decode_advance` for a batch of sequences, the last op of a batched decode step.
For each sequence b, in GPU buffers (in place): the id just chosen becomes its next input token and lands in its
row of a position-indexed history; its position and kv_len advance by one. One dispatch whatever B."""

from __future__ import annotations

import attrs

from wgraph.api_types import TensorT

from wgraph.errors import ShapeError
from wgraph.kernels.registry import kernel, select_variant
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.ops.decode import check_u32_inputs

OP = "decode_advance_batched"


@attrs.frozen
class AdvanceBatchedParams:
    pass


def _infer(params, specs):
    check_u32_inputs(OP, ("next_ids", "token", "history", "pos", "kv_len"), specs)
    next_ids, token, history, pos, kv_len = specs
    if len(next_ids.shape) != 1 or next_ids.shape[0] < 1:
        raise ShapeError(f"{OP}: next_ids must be [batch] with batch >= 1, got shape {next_ids.shape}")
    batch = next_ids.shape[0]
    for name, s in (("token", token), ("pos", pos), ("kv_len", kv_len)):
        if s.shape != (batch,):
            raise ShapeError(f"{OP}: {name} must be [batch={batch}] like next_ids, got shape {s.shape}")
    if len(history.shape) != 2 or history.shape[0] != batch or history.shape[1] < 1:
        raise ShapeError(f"{OP}: history must be [batch={batch}, positions >= 1], got shape {history.shape}")
    select_variant(OP)
    return ()


def _encode(ctx, params, inputs, outputs):
    next_ids, token, history, pos, kv_len = inputs
    batch = next_ids.shape[0]
    return [ctx.dispatch(OP, uniforms={"batch": batch, "history_len": history.shape[1]},
                         bindings={"next_id": next_ids, "token": token, "history": history, "pos": pos,
                                   "kv_len": kv_len},
                         workgroups=(ceil_div(batch, kernel(OP).threads), 1, 1), label=OP)]


DECODE_ADVANCE_BATCHED = register(OpDef(OP, _infer, _encode, inputs=("next_ids", "token", "history", "pos", "kv_len")))


def decode_advance_batched(next_ids: TensorT, *, token: TensorT, history: TensorT, pos: TensorT,
                           kv_len: TensorT) -> None:
    """In place, on the GPU, for each sequence b (u32 tensors: next_ids, token, pos, kv_len [B], history
    [B, L]): p = pos[b] + 1; token[b] = next_ids[b]; history[b, p] = next_ids[b] when p < L; pos[b] = p;
    kv_len[b] = p + 1.

    next_ids: u32 [B], each sequence's new id.
    token: u32 [B], the next step's input ids (set to next_ids).
    history: u32 [B, L], every sequence's ids so far.
    pos: u32 [B], the positions (incremented).
    kv_len: u32 [B], the cache lengths attention reads (set to the new positions + 1).
    """
    apply(DECODE_ADVANCE_BATCHED, AdvanceBatchedParams(), (next_ids, token, history, pos, kv_len))
