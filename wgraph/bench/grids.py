"""The shapes the attention benchmark runs: named grids from CI-tiny to the full H200 grid."""

from __future__ import annotations

import itertools

import attrs


@attrs.frozen
class Shape:
    """One attention call: S queries over L keys (S == 1 is decode), causal, Hq/Hkv heads of head_dim D."""

    phase: str  # "prefill" | "decode"
    S: int
    L: int
    Hq: int
    Hkv: int
    D: int
    dtype: str  # "f32" | "f16" (q, kv, out in f16) | "f16kv" (f32 q/out, f16 kv)
    causal: bool = True

    def label(self) -> str:
        n = f"S={self.S}" if self.phase == "prefill" else f"L={self.L}"
        return f"{self.phase} {n} Hq/Hkv={self.Hq}/{self.Hkv} D={self.D} {self.dtype}"


def _grid(prefill_s, decode_l, heads, dims, dtypes) -> tuple[Shape, ...]:
    shapes = [Shape("prefill", s, s, hq, hkv, d, dt) for dt, (hq, hkv), d, s in itertools.product(dtypes, heads, dims, prefill_s)]
    shapes += [Shape("decode", 1, n, hq, hkv, d, dt) for dt, (hq, hkv), d, n in itertools.product(dtypes, heads, dims, decode_l)]
    return tuple(shapes)


SPEC_HEADS = ((32, 8), (16, 16))
SPEC_DIMS = (64, 128)

GRIDS = {
    # the test's grid: seconds on lavapipe
    "tiny": _grid((16,), (32,), ((4, 2),), (32,), ("f32", "f16")),
    # `--quick` on lavapipe: small heads, GQA 8/2 at D=64 (lavapipe takes seconds for a 512x8x64 prefill, and
    # about a second per shape here with its warm-up and timing)
    "quick": _grid((64, 128), (256, 1024), ((8, 2),), (64,), ("f32", "f16")),
    # the heads and dims at two lengths each
    "small": _grid((512, 2048), (1024, 8192), SPEC_HEADS, SPEC_DIMS, ("f32", "f16")),
    # the grid (S in 512..8192), decode up to a 32768-row cache (issue 8)
    "full": _grid((512, 1024, 2048, 4096, 8192), (1024, 4096, 16384, 32768), SPEC_HEADS, SPEC_DIMS, ("f32", "f16")),
    # the full grid's f16 decode rows alone: bandwidth against kv length, beside torch
    "decode": _grid((), (1024, 4096, 16384, 32768), SPEC_HEADS, SPEC_DIMS, ("f16",)),
    # the full grid's prefill rows at two lengths, f32 and f16 (the prefill targets; A/Bs of the prefill kernels)
    "prefill": _grid((1024, 4096), (), SPEC_HEADS, SPEC_DIMS, ("f32", "f16")),
}


def flops(s: Shape) -> float:
    """4*S*L*Hq*D (QK^T and PV, a multiply-add each); causal with S == L counts half (the FlashAttention
    convention); causal with S != L (bottom-right aligned) counts the unmasked (query, key) pairs exactly."""
    if not s.causal or s.phase == "decode":
        pairs = s.S * s.L
    elif s.S == s.L:
        pairs = s.S * s.L / 2
    else:
        # query i sees keys 0 .. L - S + i: with S > L its first S - L queries see none (S * (L - S) + S(S+1)/2
        # went below the true count there, and negative from S > 2L + 1)
        first = max(0, s.S - s.L)  # the first query that sees a key
        seen = s.S - first  # queries that see keys: 1 .. min(S, L) keys, then L each
        pairs = (s.L - seen) * seen + seen * (seen + 1) / 2
    return 4.0 * pairs * s.Hq * s.D


def itemsizes(dtype: str) -> tuple[int, int]:
    """(q/out bytes, kv bytes) per element."""
    return {"f32": (4, 4), "f16": (2, 2), "f16kv": (4, 2)}[dtype]


def bytes_moved(s: Shape) -> int:
    """K + V read, plus Q read and out written: the decode roofline's traffic."""
    qo, kv = itemsizes(s.dtype)
    return 2 * s.L * s.Hkv * s.D * kv + 2 * s.S * s.Hq * s.D * qo
