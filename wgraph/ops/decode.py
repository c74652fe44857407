"""`decode_advance`: the bookkeeping that lets one compiled decode step replay token after token with no host
work: the chosen id becomes the next input, lands in a position-indexed history, and position and kv_len
advance, all in GPU buffers (in place, like kv_append)."""

from __future__ import annotations

import attrs

from wgraph.api_types import TensorT

from wgraph.errors import DtypeError, ShapeError
from wgraph.ops.core import OpDef, apply, register
from wgraph.kernels.registry import select_variant


@attrs.frozen
class AdvanceParams:
    pass


ADVANCE_INPUTS = ("next_id", "token", "history", "pos", "kv_len")


def check_u32_inputs(op: str, names, specs) -> None:
    """Each of `specs` a u32 tensor of at least one value (decode_advance's and its batched twin's inputs)."""
    for name, s in zip(names, specs):
        if s is None or s.dtype != "u32" or s.size < 1:
            got = None if s is None else f"{s.dtype} {s.shape}"
            # an empty u32 tensor has the right dtype and the wrong shape: a ShapeError, as the ops' own checks
            error = ShapeError if s is not None and s.dtype == "u32" else DtypeError
            raise error(f"{op}: {name} must be a u32 tensor of at least one value, got {got}")


def _infer_advance(params, specs):
    names = ADVANCE_INPUTS
    check_u32_inputs("decode_advance", names, specs)
    for name, s in zip(names, specs):
        if name != "history" and s.size != 1:
            raise ShapeError(f"decode_advance: {name} must hold exactly one value, got shape {s.shape}")
    history = specs[2]
    # [L]: the kernel indexes the flat buffer, so a [2, 3] history took position 4 as history[1, 1], another row
    if len(history.shape) != 1:
        raise ShapeError(f"decode_advance: history must be [positions] (one sequence; decode_advance_batched takes "
                         f"[batch, positions]), got shape {history.shape}")
    select_variant("decode_advance")
    return ()


def _encode_advance(ctx, params, inputs, outputs):
    next_id, token, history, pos, kv_len = inputs
    return [ctx.dispatch("decode_advance", uniforms={"batch": 1, "history_len": history.size},
                         bindings={"next_id": next_id, "token": token, "history": history, "pos": pos,
                                   "kv_len": kv_len},
                         workgroups=(1, 1, 1), label="decode_advance")]


DECODE_ADVANCE = register(OpDef("decode_advance", _infer_advance, _encode_advance,
                                inputs=ADVANCE_INPUTS))


def decode_advance(next_id: TensorT, *, token: TensorT, history: TensorT, pos: TensorT, kv_len: TensorT) -> None:
    """In place, on the GPU (u32 one-value tensors but `history`): p = pos + 1; token = next_id;
    history[p] = next_id when p < len(history); pos = p; kv_len = p + 1.

    next_id: u32 [1], the id sampling or argmax wrote.
    token: u32 [1], the next step's input id (set to next_id).
    history: u32 [L], every id so far (next_id written at the new position while it fits).
    pos: u32 [1], the position (incremented).
    kv_len: u32 [1], the cache length attention reads (set to the new position + 1).
    """
    apply(DECODE_ADVANCE, AdvanceParams(), (next_id, token, history, pos, kv_len))
