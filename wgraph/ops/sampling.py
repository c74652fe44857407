"""Choosing token ids on the GPU from logits [..., V], one workgroup per row: `argmax` (ties: the lowest
index; a NaN wins, the first one, as numpy.argmax) and `sample` (temperature, top-k, top-p, from a counter-based
hash of (seed, step, row)). Both make u32 ids and can write into an existing tensor (`out=`), so a decode
step can leave the next token where the next step's embedding reads it."""

from __future__ import annotations

import math

import attrs

from wgraph import args
from wgraph.api_types import TensorT
from wgraph.errors import LimitError, WgraphError
from wgraph.ops.core import ceil_div, OpDef, apply, register
from wgraph.ops.rows import check_row_loops, check_rows, row_count, row_loops
from wgraph.kernels import wgsl
from wgraph.kernels.registry import kernel, kernels_for, select_variant
from wgraph.tensor import Tensor, TensorSpec

@attrs.frozen
class SampleSettings:
    """How `sample` draws the next id (temperature > 0): what a model's decode program passes to `sample`."""

    temperature: float
    top_k: int
    top_p: float
    seed: int


def _sample_loops(variant: str, dim: int, top_k: bool, top_p: bool) -> int:
    """Loop iterations of one sample invocation: the max, each search (an outer loop of the shader's
    SEARCH_PASSES passes, each a stride over the row, a reduction and the 7-pivot walk), top-p's total, and the
    draw (a chunk sum, the scan, the walk, two reductions). A filter that is off still costs on lavapipe (its
    branch, which no invocation takes, ran out of budget 7 or more iterations early; deleted, it did not): an
    off filter counts its loops as one pass of one trip each. Rows of 1193727 values with top_k alone, or of
    5588986 with neither filter, were under the old count and over the cap: nothing was written, the output
    kept its old value."""
    k = kernel(variant)
    passes, threads = wgsl.parse_consts(k.source)["SEARCH_PASSES"], k.threads

    def search(n: int, p: int) -> int:
        return p * (row_loops(n, threads, 1, 1) + 8) + p + 1

    top_k_loops = search(dim, passes) if top_k else search(1, 1)
    top_p_loops = (row_loops(dim, threads, 1, 1) + search(dim, passes) if top_p
                   else row_loops(1, threads, 1, 1) + search(1, 1))
    return row_loops(dim, threads, 1, 1) + top_k_loops + top_p_loops + row_loops(dim, threads, 2, 3)


# ---- argmax ----

@attrs.frozen
class ArgmaxParams:
    pass


def _infer_argmax(params, specs):
    (x,) = specs
    check_rows("argmax", x)
    select_variant("argmax", input_dtype=x.dtype)
    return (TensorSpec(x.shape[:-1], "u32"),)


def _encode_argmax(ctx, params, inputs, outputs):
    (x,), (ids,) = inputs, outputs
    k = kernel(select_variant("argmax", input_dtype=x.dtype))
    dim, rows = x.shape[-1], row_count(x.shape)
    chunk_len = k.facts["chunk_len"]
    chunks = max(1, ceil_div(dim, chunk_len))  # a row longer than chunk_len: one workgroup per chunk
    check_row_loops(ctx, "argmax", dim, row_loops(min(dim, chunk_len), k.threads, 1, 1))
    u = {"rows": rows, "dim": dim, "chunk_len": chunk_len, "chunks": chunks}
    if chunks == 1:
        return [ctx.dispatch(k.name, uniforms=u, bindings={"x": x, "out": ids, "parts": ctx.fallback("argmax.parts")},
                             workgroups=ctx.grid(rows), label="argmax")]
    merge = kernel("argmax_merge")
    check_row_loops(ctx, "argmax", dim, row_loops(chunks, merge.threads, 1, 1))
    parts = ctx.scratch((rows * chunks * 2,), "u32", "argmax.parts")
    return [ctx.dispatch(k.name, uniforms=u, bindings={"x": x, "out": ids, "parts": parts},
                         workgroups=ctx.grid(rows * chunks), label="argmax"),
            ctx.dispatch(merge.name, uniforms={"rows": rows, "chunks": chunks}, bindings={"parts": parts, "out": ids},
                         workgroups=ctx.grid(rows), label="argmax.merge")]


ARGMAX = register(OpDef("argmax", _infer_argmax, _encode_argmax, inputs=("x",)))


def argmax(x: TensorT, *, out: TensorT | None = None) -> TensorT:
    """u32 index of the largest value along the last axis: x [..., V] f32 or f16 -> [...]. Ties give the
    lowest index and a NaN beats every number (the first NaN's index), as numpy.argmax.

    x: [..., V] f32 or f16.
    out: a u32 tensor [...] to write the ids into.
    """
    return apply(ARGMAX, ArgmaxParams(), (x,), out=out)


# ---- sample ----

@attrs.frozen
class SampleParams:
    temperature: float
    top_k: int = 0  # 0: off
    top_p: float = 1.0  # 1: off
    seed: int = 0
    step: int = 0  # added to step_buf[0] when a step tensor is given


def _sample_variant(dtype: str, dim: int) -> str:
    """The first sample variant of `dtype` whose max_dim fits the row (counts are reduced in f32: exact below
    2^24)."""
    select_variant("sample", input_dtype=dtype)  # DtypeError naming the choices if none takes this dtype
    fits = [k for k in kernels_for("sample") if k.facts.get("input_dtype") == dtype]
    for k in fits:
        if dim <= k.limits["max_dim"]:
            return k.name
    raise LimitError(f"sample: rows of {dim} values; at most {max(k.limits['max_dim'] for k in fits)}")


def _infer_sample(params: SampleParams, specs):
    x, step_t = specs
    check_rows("sample", x, "logits")   # sample's argument is logits
    check_sampling("sample", params.temperature, params.top_k, params.top_p, params.seed)
    args.real("sample", "temperature", params.temperature, 0.0, open_lo=True)  # 0 is argmax: never a sample node
    args.integer("sample", "step", params.step)
    if step_t is not None:
        _check_gpu_step(step_t)
    _sample_variant(x.dtype, x.shape[-1])
    return (TensorSpec(x.shape[:-1], "u32"),)


# Past 2^160, 1 / temperature makes every nonzero gap between f32 logits (>= 2^-149) a weight of exactly 0, as the
# exact value does: the cap changes no draw.
_MAX_INV_TEMPERATURE = 2.0**160


def _inv_temperature_factors(temperature: float) -> tuple[float, float]:
    """1 / temperature as (a power of two, the rest), both normal f32 for every temperature sample takes, (0, f32's
    max]; sample.wgsl multiplies a logit's gap by the power of two first, which is exact. One f32 held
    min(1 / temperature, 1e30): at temperature 1e-35 logits 1e-35 apart weighed e^-1e-5 instead of e^-1 (1 / 1e-35
    is past f32's max), and 1 / 3e38 is a subnormal a GPU may flush to 0."""
    scale = min(1.0 / temperature, _MAX_INV_TEMPERATURE)
    pow2 = 2.0 ** (math.frexp(scale)[1] // 2)
    return pow2, scale / pow2


def _encode_sample(ctx, params: SampleParams, inputs, outputs):
    (x, step_t), (ids,) = inputs, outputs
    dim = x.shape[-1]
    variant = _sample_variant(x.dtype, dim)
    top_k = params.top_k if 0 < params.top_k < dim else 0
    check_row_loops(ctx, "sample", dim, _sample_loops(variant, dim, top_k > 0, params.top_p < 1))
    rows = row_count(x.shape)
    # a top_p below f32's smallest normal keeps the top id alone, as the smallest normal does; in the f32 uniform
    # it would be 0 (or a subnormal a GPU may flush to 0): no id would be kept
    # params are plain Python numbers (an op call's rules and Program.update make them so: numpy's int32 &
    # 0xFFFFFFFF would overflow, and 1 / np.float16(1e-5) is f16's inf)
    pow2, rest = _inv_temperature_factors(params.temperature)
    u = {"rows": rows, "dim": dim, "top_k": top_k, "top_p": max(params.top_p, args.F32_TINY),
         "inv_temperature_pow2": pow2, "inv_temperature_rest": rest, "seed_lo": params.seed & 0xFFFFFFFF,
         "seed_hi": params.seed >> 32, "step": params.step, "use_step_buf": int(step_t is not None)}
    return [ctx.dispatch(variant, uniforms=u,
                         bindings={"x": x, "step_buf": step_t if step_t is not None else ctx.fallback("sample.step"),
                                   "out": ids},
                         workgroups=ctx.grid(rows), label="sample")]


SAMPLE = register(OpDef("sample", _infer_sample, _encode_sample, inputs=("logits", "step?")))


def _is_gpu(v) -> bool:
    return isinstance(v, Tensor) or getattr(v, "_wgraph_symbol_", False)


def _check_gpu_step(spec) -> None:
    spec.check_u32_scalar(f"sample: a GPU step must be a u32 tensor with one value, got {spec.shape} {spec.dtype}")


def check_sampling(fn: str, temperature, top_k, top_p, seed, prefix: str = "") -> tuple:
    """(temperature, top_k, top_p, seed) by their rules (args.py), for `fn` (sample, or a model's generate);
    temperature 0 is argmax, so it is allowed. `prefix` goes before each name in a message ("sample.")."""
    return (args.real(fn, prefix + "temperature", temperature, 0.0), args.integer(fn, prefix + "top_k", top_k),
            args.real(fn, prefix + "top_p", top_p, 0.0, 1.0, open_lo=True),
            args.integer(fn, prefix + "seed", seed, 0, args.U64_MAX))


def check_settings(fn: str, sample) -> SampleSettings:
    """`sample` (a model's `prefill(sample=)`) checked field by field, as plain values: temperature > 0 (None is
    argmax) and check_sampling's rules for the rest."""
    if not isinstance(sample, SampleSettings):
        raise args.fail(fn, "sample", sample, "None or a SampleSettings")
    temperature, top_k, top_p, seed = check_sampling(fn, sample.temperature, sample.top_k, sample.top_p, sample.seed,
                                                     "sample.")
    args.real(fn, "sample.temperature", temperature, 0.0, open_lo=True)  # 0 would be argmax: sample=None says it
    return SampleSettings(temperature, top_k, top_p, seed)


def sample(logits: TensorT, *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
           step: int | TensorT = 0, out: TensorT | None = None) -> TensorT:
    """Draw one u32 id per row of logits [..., V] (f32 or f16) from softmax(logits / temperature), kept to the
    top_k largest (0: all; ties at the k-th value kept) and then to the fewest largest whose probability
    reaches top_p (the crossing one included), as Hugging Face's warpers. The draw is a hash of (seed, step,
    row): reproducible. `step` is an int or a u32 GPU tensor read at dispatch time (a replayed graph draws anew
    as it advances). temperature 0 is argmax. A row holding a NaN or +inf (where torch's softmax gives NaN and
    its multinomial raises) or with every logit -inf draws nothing: id 4294967295 and the device error flag.

    logits: [..., V] f32 or f16.
    temperature: a finite real >= 0; 0 is argmax.
    top_k: keep the k largest logits (0: all).
    top_p: keep the fewest largest whose probability reaches it, in (0, 1] (1: all).
    seed: the draw's seed (a u64).
    step: the draw's step: an int or a u32 tensor with one value read at dispatch time.
    out: a u32 tensor [...] to write the ids into.
    """
    temperature, top_k, top_p, seed = check_sampling("sample", temperature, top_k, top_p, seed)
    if _is_gpu(step):   # checked before temperature 0 goes to argmax, which reads no step: a bad one went unseen
        _check_gpu_step(step.spec)
        host_step = None
    else:
        host_step = args.integer("sample", "step", step)
    if temperature == 0:
        try:
            return argmax(logits, out=out)
        except WgraphError as e:   # the caller called sample: "argmax: out= has ..." named an op it never called
            raise type(e)(f"sample (temperature 0 is argmax): {e}") from None
    params = SampleParams(temperature, top_k, top_p, seed)
    if host_step is None:
        return apply(SAMPLE, params, (logits, step), out=out)
    return apply(SAMPLE, attrs.evolve(params, step=host_step), (logits, None), out=out)
