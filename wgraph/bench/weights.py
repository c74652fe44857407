"""Seeded pseudo-random weights for the bench, made where they are used: on the GPU by a kernel (the GEMV
shapes, the model rows: an 8B model's 16 GB never pass through the host), with numpy (to check results) and
with torch on CUDA (the reference runs on the same values). Element j of a tensor seeded `seed` is
(h >> 21 - 1024) / 1024 * scale, h = lowbias32(j ^ lowbias32(seed)): exact in f32 and f16 for a power-of-two
scale (wgraph/shaders/bench_fill.wgsl)."""

from __future__ import annotations

import math
import zlib

import attrs
import numpy as np

from wgraph.errors import ShapeError
from wgraph.ops.core import OpDef, apply, ceil_div, register

M32 = 0xFFFFFFFF


def seed_of(name: str) -> int:
    """A tensor's seed from its name (stable across runs and processes)."""
    return zlib.crc32(name.encode())


def scale_for(fan_in: int) -> float:
    """The power of two nearest sqrt(3 / fan_in): uniform [-1, 1) * scale has std ~ 1 / sqrt(fan_in)."""
    return 2.0 ** round(math.log2(math.sqrt(3.0 / fan_in)))


# ---- on the GPU ----

@attrs.frozen
class FillParams:
    seed: int
    scale: float
    first: int = 0  # the first element filled
    count: int | None = None  # elements filled (None: to the end)


def _infer_fill(params: FillParams, specs):
    (t,) = specs
    count = t.size - params.first if params.count is None else params.count
    if t.dtype not in ("f32", "f16") or params.first < 0 or params.first + count > t.size:
        raise ShapeError(f"bench_fill: fills elements [{params.first}, {params.first + count}) of an f32 or f16 "
                         f"tensor, got {t.dtype} {t.shape}")
    if t.dtype == "f16" and (params.first % 2 or count % 2):
        raise ShapeError(f"bench_fill: an f16 range must start and end on a 4-byte word, got [{params.first}, "
                         f"{params.first + count})")
    return ()


def _encode_fill(ctx, params: FillParams, inputs, outputs):
    (t,) = inputs
    halves = int(t.dtype == "f16")
    count = t.size - params.first if params.count is None else params.count
    words = count // 2 if halves else count
    groups = max(1, min(ceil_div(words, 256), ctx.caps.max_workgroups_per_dim))
    return [ctx.dispatch("bench_fill", uniforms={"first_word": params.first // (2 if halves else 1), "words": words,
                                                 "seed": params.seed & M32, "scale": params.scale, "halves": halves},
                         bindings={"y": t}, workgroups=(groups, 1, 1), label="bench_fill")]


BENCH_FILL = register(OpDef("bench_fill", _infer_fill, _encode_fill))


def fill(t, seed: int, scale: float, first: int = 0, count: int | None = None) -> None:
    """Fill elements [first, first + count) of tensor `t` in place (element first + j takes value j)."""
    apply(BENCH_FILL, FillParams(int(seed), float(scale), int(first), count), (t,))


# ---- the same values on the host and in torch ----

def _lowbias32(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint32)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def values(seed: int, index: np.ndarray, scale: float) -> np.ndarray:
    """float32 values of elements `index` (within the filled range) of a tensor seeded `seed`."""
    key = _lowbias32(np.array([seed & M32], np.uint32))[0]
    h = _lowbias32(np.asarray(index, np.uint32) ^ key)
    return ((h >> np.uint32(21)).astype(np.float32) - 1024.0) / 1024.0 * np.float32(scale)


def rows(seed: int, shape: tuple[int, int], which, scale: float) -> np.ndarray:
    """Rows `which` of a [n, k] matrix seeded `seed`, as float32."""
    which = np.asarray(which, np.int64)
    k = shape[1]
    return values(seed, (which[:, None] * k + np.arange(k)[None, :]).astype(np.uint32), scale)


def torch_fill(t, seed: int, scale: float, chunk: int = 1 << 26) -> None:
    """Fill a contiguous CUDA torch tensor with the same values (int64 math, masked to 32 bits)."""
    import torch

    flat = t.view(-1)
    key = int(_lowbias32(np.array([seed & M32], np.uint32))[0])

    def lowbias(x):
        x = x ^ (x >> 16)
        x = (x * 0x7FEB352D) & M32
        x = x ^ (x >> 15)
        x = (x * 0x846CA68B) & M32  # wraps past 2^63 in int64: the low 32 bits are still right
        return x ^ (x >> 16)

    for start in range(0, flat.numel(), chunk):
        end = min(start + chunk, flat.numel())
        idx = torch.arange(start, end, device=t.device, dtype=torch.int64)
        h = lowbias(idx ^ key)
        flat[start:end] = (((h >> 21).to(torch.float32) - 1024.0) / 1024.0 * scale).to(t.dtype)
