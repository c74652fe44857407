"""`linear`'s math with every fused option, in numpy: the reference of the f16/f32 GEMV (tests/test_gemv.py) and
of the GEMV on GGML blocks (tests/test_quant_linear.py, on the dequantized weights)."""

import numpy as np


def fused_linear_reference(x, w, b, norm, residual, swiglu, eps, dtype):
    """act(rmsnorm(x) @ w.T + b) + residual in `dtype` (np.float64 or np.float32), step by step."""
    x = x.astype(dtype)
    if norm is not None:
        x = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + dtype(eps)) * norm.astype(dtype)
    y = x @ w.astype(dtype).T
    if b is not None:
        y = y + b.astype(dtype)
    if swiglu:
        half = y.shape[-1] // 2
        gate, up = y[..., :half], y[..., half:]
        with np.errstate(over="ignore"):   # exp(-gate) is inf for gate < -709: silu's limit, 0, as it should be
            y = gate / (1 + np.exp(-gate)) * up
    if residual is not None:
        y = y + residual.astype(dtype)
    return y
