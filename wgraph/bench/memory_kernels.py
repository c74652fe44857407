"""The bench's memory kernels (ops private to the bench): the copy kernel, whose bandwidth every memory-bound row
is a fraction of (and the steady work that brings an idle GPU's clocks up before timing), and the read kernel, a
pass that only reads: the ceiling of a row that reads a given number of bytes (wgraph/bench/gemv.py)."""

from __future__ import annotations

import attrs

import wgraph as wg
from wgraph.ops.core import OpDef, ceil_div, register
from wgraph.tensor import TensorSpec

THREADS = 256  # registry/bench.toml's workgroup_size of both kernels


@attrs.frozen
class CopyParams:
    pass


@attrs.frozen
class ReadParams:
    magic: int = 0xFFFFFFFF  # the lane sum that makes a thread write its words (tests set one thread's)


def _words(op: str, x: TensorSpec) -> int:
    if x.nbytes % 16:
        raise wg.ShapeError(f"{op} reads 16-byte words; {x.nbytes} bytes is not a multiple of 16")
    return x.nbytes // 16


def _grid(ctx, words: int) -> tuple[int, int, int]:
    """One word a thread; past the device's workgroup count per dimension, the threads stride over the rest."""
    return (max(1, min(ceil_div(words, THREADS), ctx.caps.max_workgroups_per_dim)), 1, 1)


def _infer_copy(params, specs):
    (x,) = specs
    _words("bench_copy", x)
    return (TensorSpec(x.shape, x.dtype),)


def _encode_copy(ctx, params, inputs, outputs):
    (x,), (y,) = inputs, outputs
    count = x.nbytes // 16
    return [ctx.dispatch("bench_copy", uniforms={"count": count}, bindings={"x": x, "y": y},
                         workgroups=_grid(ctx, count), label="bench_copy")]


def _infer_read(params, specs):
    (x,) = specs
    _words("bench_read", x)
    return (TensorSpec((4,), "u32"),)  # one word: written only where a thread's sum is params.magic


def _encode_read(ctx, params, inputs, outputs):
    (x,), (y,) = inputs, outputs
    count = x.nbytes // 16
    return [ctx.dispatch("bench_read", uniforms={"count": count, "magic": params.magic}, bindings={"x": x, "y": y},
                         workgroups=_grid(ctx, count), label="bench_read")]


BENCH_COPY = register(OpDef("bench_copy", _infer_copy, _encode_copy))
BENCH_READ = register(OpDef("bench_read", _infer_read, _encode_read))
