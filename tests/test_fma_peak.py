"""The FMA-peak kernel of the bench (fma_peak.wgsl): each thread's output is its chains' values after exactly
the steps the FLOP count assumes, against the recurrence in float64 (so no chain was folded or dropped)."""

import numpy as np
import pytest

from wgraph.bench import fma
from wgraph.kernels.registry import kernel


def _reference(variant: str, iterations: int, threads: int) -> np.ndarray:
    """a <- a * mul + add, 32 steps per iteration, 8 chains per thread from starts 0.5 + (i % 64 + c) / 1000,
    each value rounded to the type; the thread's output is the sum of its chains' lanes."""
    elem = np.float16 if "f16" in variant else np.float32
    lanes = {"f32": 1, "f16": 1, "vec2f16": 2, "vec4f16": 4}[variant.removeprefix("bench_fma_")]
    mul, add = elem(np.float32(0.9)), elem(np.float32(0.1))
    i = np.arange(threads)
    a = np.stack([(np.float32(0.5) + np.float32(i % 64) * np.float32(1e-3)) + np.float32(c) * np.float32(1e-3)
                  for c in range(8)], axis=1).astype(elem)
    for _ in range(iterations * 32):
        a = (a.astype(np.float64) * float(mul) + float(add)).astype(elem)
    return a.astype(np.float64).sum(axis=1) * lanes


@pytest.mark.parametrize("name", fma.TYPES)
def test_fma_chains_against_float64(dev, name):
    variant = f"bench_fma_{name}"
    if not set(kernel(variant).features) <= dev.caps.features:
        pytest.skip(f"{variant} needs {kernel(variant).features}")
    for iterations in (1, 3):
        got = fma.run_fma(dev, variant, iterations, 2).numpy()
        want = _reference(variant, iterations, got.size)
        # f32: one rounding per step either way; f16: fma rounds once where the reference rounds once too
        tol = 1e-6 if name == "f32" else 4e-3
        assert np.max(np.abs(got - want) / want) < tol, (iterations, got[:4], want[:4])
    assert fma.fmas_per_call(variant, 3, 2) == 2 * 256 * 3 * 32 * 8 * {"f32": 1, "f16": 1, "vec2f16": 2,
                                                                          "vec4f16": 4}[name]
