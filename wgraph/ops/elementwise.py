"""Elementwise ops: each op's kernel is a registry entry (shaders/registry/elementwise.toml) that gives the
unary or binary shader template (shaders/elementwise_*.wgsl) its WGSL expression, one kernel per dtype of
the `float` matrix; this module gives each op its form and public function. Adding an op is a registry entry,
a FORMS row and its public function.

Math is done in f32 (f16 elements are widened, the result rounded once). Binary ops broadcast a trailing-
dims operand as numpy does when b's shape is a suffix of a's ([S, H] + [H]); `swiglu` reads the two halves
of one tensor's last dim."""

from __future__ import annotations

import attrs

from wgraph import args
from wgraph.api_types import TensorT
from wgraph.errors import DtypeError, ShapeError
from wgraph.ops.core import OpDef, apply, ceil_div, register
from wgraph.kernels.registry import kernel, select_variant
from wgraph.tensor import Tensor, TensorSpec

# Each op's form: "unary" (an expression over `v` and the float param `alpha`), "binary" (over `va`, `vb`;
# b broadcast over a's leading dims) or "halves" (va, vb = the two halves of x's last dim).
FORMS = {"scale": "unary", "silu": "unary", "gelu": "unary", "gelu_tanh": "unary", "softcap": "unary",
         "add": "binary", "mul": "binary", "swiglu": "halves", "geglu": "halves", "geglu_tanh": "halves"}


def _groups(variant: str, n: int) -> int:
    """Workgroups for n elements: one invocation per element, or per u32 word of `elems_per_word` elements (bf16)
    (W of docs/ops.md, "Indirect dispatch")."""
    k = kernel(variant)
    return ceil_div(ceil_div(n, k.limits.get("elems_per_word", 1)), k.threads)


def _workgroups(ctx, variant: str, n: int, indirect: Tensor | None) -> dict:
    if indirect is not None:
        return {"indirect": (indirect, 0)}
    return {"workgroups": ctx.grid(_groups(variant, n))}


def direct_workgroups(op: str, out: TensorSpec) -> int:
    """The workgroups `op`'s direct layout launches over the output `out`: the most a known set of indirect
    counts may ask for (graph/export.py checks a file's against it)."""
    return max(1, _groups(select_variant(op, output_dtype=out.dtype), out.size))


def _check_indirect(op: str, spec):
    """`indirect=`: u32 workgroup counts [x, y, z]. A wrong dtype is a DtypeError, too few values a ShapeError, as
    for every other tensor argument (an f32 indirect was a ShapeError that named no op)."""
    if spec is None:
        return
    got = f"{spec.dtype} {spec.shape}"
    if spec.dtype != "u32":
        raise DtypeError(f"{op}: indirect must be a u32 tensor of workgroup counts (x, y, z), got {got}")
    if spec.size < 3:
        raise ShapeError(f"{op}: indirect must hold at least 3 values (x, y, z), got {got}")


@attrs.frozen
class UnaryParams:
    """Params of a unary op without any (silu, gelu): the expression's `alpha` is 0."""

    alpha = 0.0


@attrs.frozen
class ScaleParams:
    """scale's factor, the expression's `alpha`."""

    factor: float

    @property
    def alpha(self) -> float:
        return self.factor


@attrs.frozen
class SoftcapParams:
    """softcap's cap, the expression's `alpha`."""

    cap: float

    @property
    def alpha(self) -> float:
        return self.cap


@attrs.frozen
class BinaryParams:
    pass


# The float param of the unary ops that take one, and its rule: the public function checks it, and a
# Program.update's params come to infer unchecked, so infer checks it too.
_ALPHA_RULES = {"scale": lambda v: args.factor("scale", "factor", v),
                "softcap": lambda v: args.normal_real("softcap", "cap", v)}  # a cap that is 0 in f32: x / 0


def _unary(op: str):
    rule = _ALPHA_RULES.get(op)

    def infer(params: UnaryParams | ScaleParams | SoftcapParams, specs):
        x, indirect = specs
        if rule is not None:
            rule(params.alpha)
        select_variant(op, output_dtype=x.dtype)
        _check_indirect(op, indirect)
        return (TensorSpec(x.shape, x.dtype),)

    def encode(ctx, params: UnaryParams | ScaleParams, inputs, outputs):
        (x, indirect), (y,) = inputs, outputs
        variant = select_variant(op, output_dtype=x.dtype)
        return [ctx.dispatch(variant, uniforms={"n": x.size, "alpha": params.alpha}, bindings={"x": x, "y": y},
                             label=op, **_workgroups(ctx, variant, x.size, indirect))]

    return infer, encode


def _binary(op: str):
    def infer(params, specs):
        a, b, indirect = specs
        if a.dtype != b.dtype:
            raise DtypeError(f"{op}: dtypes {a.dtype} and {b.dtype} differ (no implicit casts)")
        if len(b.shape) > len(a.shape) or a.shape[len(a.shape) - len(b.shape):] != b.shape:
            raise ShapeError(f"{op}: shapes {a.shape} and {b.shape} do not broadcast: b's shape must equal a's or "
                             f"be a suffix of it (its trailing dims, as [S, H] with [H])")
        select_variant(op, output_dtype=a.dtype)
        _check_indirect(op, indirect)
        return (TensorSpec(a.shape, a.dtype),)

    def encode(ctx, params, inputs, outputs):
        (a, b, indirect), (c,) = inputs, outputs
        variant = select_variant(op, output_dtype=a.dtype)
        cols = max(b.size, 1)  # each run of b.size elements of a meets the whole of b
        u = {"n": a.size, "cols": cols, "a_stride": cols, "a_offset": 0, "b_stride": 0, "b_offset": 0}
        return [ctx.dispatch(variant, uniforms=u, bindings={"a": a, "b": b, "c": c}, label=op,
                             **_workgroups(ctx, variant, a.size, indirect))]

    return infer, encode


def _halves(op: str):
    def infer(params, specs):
        (x,) = specs
        if len(x.shape) < 1 or x.shape[-1] % 2:
            raise ShapeError(f"{op}: x must be [..., 2 * n] (two halves of the last dim), got {x.shape}")
        select_variant(op, output_dtype=x.dtype)
        return (TensorSpec(x.shape[:-1] + (x.shape[-1] // 2,), x.dtype),)

    def encode(ctx, params, inputs, outputs):
        (x,), (y,) = inputs, outputs
        variant = select_variant(op, output_dtype=x.dtype)
        half = x.shape[-1] // 2
        u = {"n": y.size, "cols": max(half, 1), "a_stride": 2 * half, "a_offset": 0, "b_stride": 2 * half,
             "b_offset": half}
        return [ctx.dispatch(variant, uniforms=u, bindings={"a": x, "b": x, "c": y}, label=op,
                             **_workgroups(ctx, variant, y.size, None))]

    return infer, encode


_FORMS = {"unary": _unary, "binary": _binary, "halves": _halves}
_INPUTS = {"unary": ("x", "indirect?"), "binary": ("a", "b", "indirect?"), "halves": ("x",)}
OPDEFS = {name: register(OpDef(name, *_FORMS[form](name), inputs=_INPUTS[form]))  # type: ignore[misc]
          for name, form in FORMS.items()}


def scale(x: TensorT, factor: float, *, indirect: TensorT | None = None, out: TensorT | None = None) -> TensorT:
    """`x * factor`. `indirect=` a u32 tensor [x, y, z] of workgroup counts read by the GPU at dispatch time.

    x: the input (f32, f16 or bf16).
    factor: 0, or a finite real of magnitude from f32's smallest normal to its largest (a smaller one is 0 in f32).
    indirect: None, or a u32 tensor [x, y, z] of workgroup counts the GPU reads at dispatch time (a recorded
        dispatch sized by an earlier kernel): 256 elements a workgroup (bf16 512), each count at most
        dev.caps.max_workgroups_per_dim, past which WebGPU skips the dispatch and nothing is written
        (docs/ops.md, "Indirect dispatch").
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    return apply(OPDEFS["scale"], ScaleParams(_ALPHA_RULES["scale"](factor)), (x, indirect), out=out)


def silu(x: TensorT, *, out: TensorT | None = None) -> TensorT:
    """`x * sigmoid(x)` (SiLU, swish).

    x: the input (f32, f16 or bf16).
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    return apply(OPDEFS["silu"], UnaryParams(), (x, None), out=out)


def gelu(x: TensorT, *, approximate: str = "none", out: TensorT | None = None) -> TensorT:
    """GELU: `x * Phi(x)` with an erf approximation (approximate="none", as torch) or the tanh form ("tanh").

    x: the input (f32, f16 or bf16).
    approximate: "none" (erf) or "tanh".
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    ops = {"none": "gelu", "tanh": "gelu_tanh"}
    return apply(OPDEFS[ops[args.choice("gelu", "approximate", approximate, tuple(ops))]], UnaryParams(), (x, None),
                 out=out)


def softcap(x: TensorT, cap: float, *, out: TensorT | None = None) -> TensorT:
    """`cap * tanh(x / cap)`: squashes x into (-cap, cap), near the identity for |x| << cap (Gemma 2's final
    logits). cap: a finite real in [f32's smallest normal, f32's largest] (a smaller one is 0 in f32).

    x: the input (f32, f16 or bf16).
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    return apply(OPDEFS["softcap"], SoftcapParams(_ALPHA_RULES["softcap"](cap)), (x, None),
                 out=out)


def add(a: TensorT, b: TensorT, *, indirect: TensorT | None = None, out: TensorT | None = None) -> TensorT:
    """`a + b`; b of a's shape or of its trailing dims (broadcast over the leading ones); one dtype.

    a: the first operand.
    b: the second, of a's shape or of its trailing dims, a's dtype.
    indirect: None, or a u32 tensor [x, y, z] of workgroup counts the GPU reads at dispatch time (a recorded
        dispatch sized by an earlier kernel): 256 elements a workgroup (bf16 512), each count at most
        dev.caps.max_workgroups_per_dim, past which WebGPU skips the dispatch and nothing is written
        (docs/ops.md, "Indirect dispatch").
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    return apply(OPDEFS["add"], BinaryParams(), (a, b, indirect), out=out)


def mul(a: TensorT, b: TensorT, *, indirect: TensorT | None = None, out: TensorT | None = None) -> TensorT:
    """`a * b`; b of a's shape or of its trailing dims (broadcast over the leading ones); one dtype.

    a: the first operand.
    b: the second, of a's shape or of its trailing dims, a's dtype.
    indirect: None, or a u32 tensor [x, y, z] of workgroup counts the GPU reads at dispatch time (a recorded
        dispatch sized by an earlier kernel): 256 elements a workgroup (bf16 512), each count at most
        dev.caps.max_workgroups_per_dim, past which WebGPU skips the dispatch and nothing is written
        (docs/ops.md, "Indirect dispatch").
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    return apply(OPDEFS["mul"], BinaryParams(), (a, b, indirect), out=out)


def geglu(x: TensorT, *, approximate: str = "none", out: TensorT | None = None) -> TensorT:
    """`gelu(gate) * up` for x = [..., 2 * n] holding [gate | up] in its last dim -> [..., n]; gelu in the erf
    form (approximate="none") or the tanh form ("tanh", Gemma's gelu_pytorch_tanh).

    x: [..., 2 * n] (f32, f16 or bf16).
    approximate: "none" (erf) or "tanh".
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    ops = {"none": "geglu", "tanh": "geglu_tanh"}
    return apply(OPDEFS[ops[args.choice("geglu", "approximate", approximate, tuple(ops))]], BinaryParams(), (x,),
                 out=out)


def swiglu(x: TensorT, *, out: TensorT | None = None) -> TensorT:
    """`silu(gate) * up` for x = [..., 2 * n] holding [gate | up] in its last dim (the output of one linear over
    stacked gate and up weights) -> [..., n].

    x: [..., 2 * n] (f32, f16 or bf16).
    out: a tensor (in a graph: a state value) of the result's shape and dtype to write into instead of a new one.
    """
    return apply(OPDEFS["swiglu"], BinaryParams(), (x,), out=out)
