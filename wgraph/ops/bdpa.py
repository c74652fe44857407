"""BDPA (basis-decomposed paged attention), decode only.

Each key/value row j is stored as basis[b] + residual[r] with (b, r, pos) = index[j]: the basis is the f16 mean
of the pre-RoPE K (and V) of every row with the same token id (a row holding NaN or inf has a basis row of its
own, so they reach only the queries that see that row), the residual the rest, int8 per (row, K|V, kv
head) in kv_quantize's format; identical quantized residuals (repeated tokens whose K/V depend on the token
only) share a row. The kernel dequantizes, applies half-split RoPE to K at the original position `pos` from a
(cos, sin) table, and masks by `pos`.

The decomposition is built on the host (numpy, `bdpa_decompose`): it groups rows by token id and deduplicates
residual rows, both data-dependent in size and done once per prefill/compaction, not per decode step; float64
there keeps the only error the int8 step. Error bound: with s = f16ceil(max|res| / 127) per (row, part, head),
every K/V element is within s/2 of the original (the residual is taken against the *f16-rounded* basis, so the
basis adds nothing). RoPE is a rotation, so it keeps the L2 error of a key, ||e_k|| <= sqrt(D) * s_k / 2; a score
moves by at most d = scale * ||q|| * sqrt(D) * max s_k / 2, and the output by at most
(exp(2d) - 1) * max|v| + max s_v / 2. That is the decomposition's error, in exact arithmetic: the kernel adds
its f32 rounding (basis + residual and the dot product, ~2^-24 of |basis| and of |q| |k|), which passes d where
the residuals are far below the basis (rows 1000 + r, |r| <= 8e-3: d 3.1e-5, the f32 score error 7.9e-5).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
from numpy.typing import ArrayLike

from wgraph.errors import ArgumentError, DtypeError, LimitError, ShapeError
from wgraph.ops.attention import require_causal, window_of
from wgraph.ops.attention_loops import check_decode_loop
from wgraph import args
from wgraph.ops.core import OpDef, apply, register, tensor_arg, type_name
from wgraph.ops.kv_cache import select_variant
from wgraph.kernels.registry import kernel
from wgraph.tensor import Tensor, TensorSpec, require

if TYPE_CHECKING:
    from wgraph.device import Device


F16_MAX = 65504.0   # the largest finite f16


def _f16_ceil(s: np.ndarray) -> np.ndarray:
    h = np.asarray(s, np.float64).astype(np.float16)
    low = h.astype(np.float64) < s
    h[low] = np.nextafter(h[low], np.float16(np.inf))
    return h


@attrs.frozen(eq=False)
class BDPAHost:
    """The decomposition as numpy arrays (shapes in the kernel's binding comments)."""

    basis: np.ndarray  # f16 [num_basis, 2, Hkv, D]
    residual: np.ndarray  # u32 [num_residuals, 2, Hkv, D / 4]
    residual_scale: np.ndarray  # f16 [num_residuals, 2, Hkv]
    index: np.ndarray  # u32 [L, 3]: basis id, residual id, original position

    def upload(self, device: Device) -> BDPACache:
        """The decomposition's arrays as tensors on `device`: the BDPACache bdpa_attention reads."""
        max_pos = int(self.index[:, 2].max()) if len(self.index) else -1
        return BDPACache(*(device.tensor(a, label=f"bdpa.{n}") for n, a in (
            ("basis", self.basis), ("residual", self.residual), ("residual_scale", self.residual_scale),
            ("index", self.index))), max_position=max_pos)


@attrs.frozen(eq=False)
class BDPACache:
    """A BDPA cache on the GPU (BDPAHost.upload makes it; bdpa_decompose's module docstring has the format).

    basis: f16 [num_basis, 2, Hkv, D], the mean pre-RoPE K and V of each token id.
    residual: u32 [num_residuals, 2, Hkv, D / 4], int8 residuals four to a word.
    residual_scale: f16 [num_residuals, 2, Hkv], their scales.
    index: u32 [L, 3]: each row's basis id, residual id and original position.
    max_position: the largest original position in the index (checked against the RoPE table)."""

    basis: Tensor
    residual: Tensor
    residual_scale: Tensor
    index: Tensor
    max_position: int  # largest original position in the index (checked against the RoPE table)


def bdpa_decompose(k: ArrayLike, v: ArrayLike, token_ids: ArrayLike, positions: ArrayLike | None = None) -> BDPAHost:
    """Decompose a prefix's keys and values on the host into basis + int8 residual rows (the module docstring
    gives the format and the error bound); `.upload(dev)` makes the BDPACache bdpa_attention reads.

    k, v: pre-RoPE keys and values [L, Hkv, D] (real arrays; D a multiple of 4; finite values within f16's
        +-65504: an ArgumentError past it).
    token_ids: [L], the token of each row (rows of one token share a basis row; a row holding NaN or inf has its
        own).
    positions: [L], each row's original position in 0 .. 2^32 - 1; None: 0 .. L - 1."""
    for name, x in (("k", k), ("v", v)):
        if np.iscomplexobj(x):   # float64 of it kept the real part (numpy's ComplexWarning only)
            raise ShapeError(f"bdpa_decompose: k and v must be real arrays [L, Hkv, D], got a complex {name} "
                             f"({np.asarray(x).dtype})")
    try:
        k, v = np.asarray(k, np.float64), np.asarray(v, np.float64)
    except (TypeError, ValueError) as e:  # strings, objects, ragged lists
        raise ShapeError(f"bdpa_decompose: k and v must be real arrays [L, Hkv, D] ({type(e).__name__}: {e})") from None
    if k.ndim != 3 or k.shape != v.shape:
        raise ShapeError(f"bdpa_decompose: k {k.shape} and v {v.shape} must both be [L, Hkv, D]")
    L, heads, dim = k.shape
    if L == 0 or heads == 0:
        raise ShapeError(f"bdpa_decompose: k and v {k.shape} hold no rows; a cache has at least one")
    if dim % 4 or dim == 0:   # 0: numpy's "zero-size array to reduction operation maximum"
        raise ShapeError(f"bdpa_decompose: head_dim {dim} must be a positive multiple of 4 (int8 x4 per u32)")
    # token ids by the id-list rule: [True, 2, 1, 3] shared row 2's basis (True == 1), 1.5 and "a" were ids, a
    # ragged list raised numpy's raw ValueError and [None] * L a raw TypeError from np.unique
    token_ids = args.ids("bdpa_decompose", "token_ids", token_ids)
    given = positions
    try:
        positions = np.arange(L) if positions is None else np.asarray(positions)
    except ValueError:   # a ragged list: numpy's raw "inhomogeneous shape" ValueError
        raise args.fail("bdpa_decompose", "positions", given, "integers (a list of them or an integer array)") from None
    if token_ids.shape != (L,) or positions.shape != (L,):
        raise ShapeError(f"bdpa_decompose: token_ids {token_ids.shape} and positions {positions.shape} must be ({L},)")
    # 2.5 or True went into the u32 index as position 2 or 1, silently (Python ints past int64 are objects)
    if positions.dtype.kind not in "iu" and not (positions.dtype == object and all(map(args.is_int, positions))):
        raise args.fail("bdpa_decompose", "positions", given, "integers (a list of them or an integer array)")
    if L and (positions.min() < 0 or positions.max() >= 2**32):
        raise LimitError(f"bdpa_decompose: positions must be in 0..2^32-1, got {positions.min()}..{positions.max()}")
    _, token_group = np.unique(token_ids, return_inverse=True)
    kv = np.stack([k, v], axis=1)  # [L, 2, H, D]
    finite = np.isfinite(kv)
    # past f16's largest a token's basis (or a residual scale, past 127 x it) became inf, and the output NaN
    over = np.argwhere(finite & (np.abs(kv) > F16_MAX))
    if len(over):
        j, part, h, d = (int(i) for i in over[0])
        name = "kv"[part]
        raise ArgumentError(f"bdpa_decompose: {name}[{j}, {h}, {d}] = {kv[j, part, h, d]:.6g} is past f16's largest, "
                            f"{F16_MAX:.0f} (the basis and the residual scales are f16); scale {name} down")
    # A row holding NaN or inf gets a basis row of its own (f16 keeps them element by element; its residual is 0
    # there): in its token's shared mean it made every row of that token NaN, rows no query saw among them
    # (docs/errors.md, nan-propagates: a NaN reaches the rows that see its key, nothing else).
    own = ~finite.reshape(L, -1).all(axis=1)
    _, basis_id = np.unique(np.where(own, L + np.arange(L), token_group.reshape(-1)), return_inverse=True)
    basis_id = basis_id.reshape(-1)
    nb = int(basis_id.max()) + 1 if L else 0
    sums = np.zeros((nb, 2, heads, dim))
    np.add.at(sums, basis_id, kv)
    basis = (sums / np.bincount(basis_id, minlength=nb)[:, None, None, None]).astype(np.float16)
    with np.errstate(invalid="ignore"):   # inf - inf of an own row's non-finite element, zeroed here
        res = np.where(finite, kv - basis.astype(np.float64)[basis_id], 0.0)
    scale = _f16_ceil(np.abs(res).max(axis=-1) / 127.0)
    s = scale.astype(np.float64)[..., None]
    codes = np.where(s > 0, np.rint(res / np.where(s > 0, s, 1)), 0).clip(-127, 127).astype(np.int64)
    words = ((codes & 0xFF).astype(np.uint64).reshape(L, 2, heads, dim // 4, 4)
             << (np.arange(4, dtype=np.uint64) * np.uint64(8))).sum(-1).astype(np.uint32)
    key = np.concatenate([words.reshape(L, -1), scale.view(np.uint16).reshape(L, -1).astype(np.uint32)], axis=1)
    _, first, res_id = np.unique(key, axis=0, return_index=True, return_inverse=True)
    index = np.stack([basis_id, res_id.reshape(-1), positions], axis=1).astype(np.uint32)
    return BDPAHost(basis, np.ascontiguousarray(words[first]), np.ascontiguousarray(scale[first]), index)


def rope_table(cos, sin) -> np.ndarray:
    """The kernel's RoPE table f32 [positions, 2, D / 2] from cos, sin [positions, D / 2]."""
    return np.stack([np.asarray(cos), np.asarray(sin)], axis=1).astype(np.float32)


@attrs.frozen
class BDPAParams:
    q_pos: int
    kv_len: int | None
    causal: bool
    sliding_window: int = 0
    softcap: float = 0.0
    scale: float | None = None
    window_right: int = -1   # FlashAttention's window_size[1]: -1 unbounded
    return_lse: bool = False


def _infer(params: BDPAParams, specs):
    q, basis, residual, rscale, index, rope, len_t = specs
    op = "bdpa_attention"
    args.integer(op, "q_pos", params.q_pos, 0, args.I32_MAX)   # the kernel compares positions in i32
    args.optional_integer(op, "kv_len", params.kv_len)
    args.flag(op, "causal", params.causal)
    args.integer(op, "sliding_window", params.sliding_window)
    args.normal_real(op, "softcap", params.softcap, or_zero=True)
    args.optional_real(op, "scale", params.scale)
    args.integer(op, "window_right", params.window_right, -1, args.I32_MAX)
    args.flag(op, "return_lse", params.return_lse)
    if len(q.shape) != 3 or q.shape[0] != 1:
        raise ShapeError(f"{op}: decode only, q must be [1, Hq, D], got {q.shape}")
    _, hq, dim = q.shape
    if dim == 0:   # else 1 / sqrt(0), the default scale: a ZeroDivisionError
        raise ShapeError(f"{op}: head_dim must be >= 1, got q {q.shape}")
    variant = select_variant(op, q_dtype=q.dtype)
    if dim > kernel(variant).limits["max_head_dim"] or dim % 4:
        raise LimitError(f"{op}: head_dim {dim} must be a multiple of 4 and at most {kernel(variant).limits['max_head_dim']}")
    require(basis, "f16", len(basis.shape) == 4 and basis.shape[1] == 2 and basis.shape[3] == dim,
            f"{op}: basis must be f16 [B, 2, Hkv, {dim}], got {basis.dtype} {basis.shape}")
    hkv = basis.shape[2]
    if hkv == 0 or hq % hkv:   # 0: a ZeroDivisionError
        raise ShapeError(f"{op}: q heads {hq} must be a multiple of kv heads {hkv}")
    nr = residual.shape[0] if residual.shape else 0
    require(residual, "u32", residual.shape == (nr, 2, hkv, dim // 4),
            f"{op}: residual must be u32 [R, 2, {hkv}, {dim // 4}], got {residual.dtype} {residual.shape}")
    require(rscale, "f16", rscale.shape == (nr, 2, hkv),
            f"{op}: residual_scale must be f16 {(nr, 2, hkv)} for residual {residual.shape}, "
            f"got {rscale.dtype} {rscale.shape}")
    require(index, "u32", len(index.shape) == 2 and index.shape[1] == 3,
            f"{op}: index must be u32 [L, 3], got {index.dtype} {index.shape}")
    require(rope, "f32", len(rope.shape) == 3 and rope.shape[1:] == (2, dim // 2),
            f"{op}: rope must be f32 [positions, 2, {dim // 2}], got {rope.dtype} {rope.shape}")
    if len_t is None and params.kv_len is None:  # params from a graph file or Program.update: no kv_len tensor
        raise ShapeError(f"{op}: kv_len must be an int or a u32 tensor with one value, got nothing")
    if len_t is None and params.kv_len > index.shape[0]:
        raise LimitError(f"{op}: kv_len {params.kv_len} is beyond the index's {index.shape[0]} rows")
    if len_t is not None:
        len_t.check_u32_scalar(f"{op}: kv_len tensor must be u32 with one value, got {len_t.shape} {len_t.dtype}")
    out = TensorSpec(q.shape, kernel(variant).output_dtype)
    return (out, TensorSpec((hq, 1), "f32")) if params.return_lse else (out,)


def _encode(ctx, params: BDPAParams, inputs, outputs):
    q, basis, residual, rscale, index, rope, len_t = inputs
    out = outputs[0]
    lse = outputs[1] if params.return_lse else ctx.fallback("bdpa.lse")
    _, hq, dim = q.shape
    variant = select_variant("bdpa_attention", q_dtype=q.dtype)
    uniforms = {
        "num_heads": hq, "num_kv_heads": basis.shape[2], "head_dim": dim, "seq_len": 1,
        "kv_len": params.kv_len or 0, "use_len_buf": int(len_t is not None), "len_cap": index.shape[0],
        "q_pos": params.q_pos,
        "causal": int(params.causal), "sliding_window": params.sliding_window,
        "scale": params.scale if params.scale is not None else 1.0 / math.sqrt(dim), "softcap": params.softcap,
        "window_right": params.window_right, "write_lse": int(params.return_lse),
    }
    bindings = {"q": q, "basis": basis, "residual": residual, "residual_scale": rscale, "index": index, "rope": rope,
                "len_buf": len_t if len_t is not None else ctx.fallback("bdpa.kv_len"), "out": out, "lse": lse}
    check_decode_loop(kernel(variant), dim, params.kv_len if len_t is None else index.shape[0], ctx.caps,
                      "bdpa_attention")
    return [ctx.dispatch(variant, uniforms=uniforms, bindings=bindings, workgroups=(hq, 1, 1), label=variant)]


BDPA = register(OpDef("bdpa_attention", _infer, _encode,
                      inputs=("q", "cache.basis", "cache.residual", "cache.residual_scale", "cache.index", "rope",
                              "kv_len?")))


def bdpa_attention(q: Tensor, cache: BDPACache, rope: Tensor, *, q_pos: int, causal: bool,
                   kv_len: int | Tensor | None = None, sliding_window: int = 0, softcap: float = 0.0,
                   scale: float | None = None, window: tuple[int, int] = (-1, -1), return_lse: bool = False,
                   out: Tensor | None = None) -> Any:
    """Decode attention of one query over a BDPA cache, masked by the keys' original positions. Returns out
    [1, Hq, D] f32, or (out, lse [Hq, 1] f32) with return_lse.

    q: the query [1, Hq, D] f32, already rotated at q_pos.
    cache: the BDPACache (bdpa_decompose(...).upload(dev)).
    rope: the RoPE table f32 [positions, 2, D / 2] (rope_table(cos, sin)); every position in the index must be
        below its row count (checked here from the host-known max_position).
    q_pos: the query's position, in [0, 2^31 - 1] (causal masking and the window compare the keys' original positions
        with it, in i32).
    causal: required, True or False: masks keys whose position is after q_pos.
    kv_len: rows of the index to attend to: an int (default: all) or a u32 GPU tensor.
    sliding_window: w > 0 masks keys at or before q_pos - w; 0 is off.
    softcap: c > 0 caps the scaled scores as c * tanh(s / c); 0 is off.
    scale: the scores' factor; None: 1 / sqrt(D).
    window: FlashAttention's window_size (left, right), -1 unbounded, as in wg.ops.attention.
    return_lse: also return the log-sum-exp of the visible scores.
    out: a tensor of the output's shape and dtype to write into.
    """
    op = "bdpa_attention"
    causal = require_causal(op, causal)
    tensor_arg(op, "q", q)
    if not isinstance(cache, BDPACache):
        raise ShapeError(f"{op}: cache must be a BDPACache (bdpa_decompose(...).upload(dev)), got {type_name(cache)}")
    if q.dtype != "f32":
        raise DtypeError(f"bdpa_attention: q must be f32 (the kernel is f16 basis, f32 q/out), got {q.dtype}")
    if isinstance(rope, Tensor) and cache.max_position >= rope.shape[0]:
        raise LimitError(f"bdpa_attention: the index has position {cache.max_position}, beyond the RoPE table's "
                         f"{rope.shape[0]} positions")
    len_t = kv_len if isinstance(kv_len, Tensor) or getattr(kv_len, "_wgraph_symbol_", False) else None
    n = None if len_t is not None else args.integer(op, "kv_len", cache.index.shape[0] if kv_len is None else kv_len)
    left, right = window_of(window, sliding_window, op)
    params = BDPAParams(args.integer(op, "q_pos", q_pos, 0, args.I32_MAX), n, causal, left + 1,
                        args.normal_real(op, "softcap", softcap, or_zero=True), args.optional_real(op, "scale", scale), right,
                        args.flag(op, "return_lse", return_lse))
    return apply(BDPA, params, (q, cache.basis, cache.residual, cache.residual_scale, cache.index, rope, len_t),
                 out=out)
