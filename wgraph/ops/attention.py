"""`attention(q, k, v, *, causal, ...)`: scaled dot-product attention with GQA, causal masking (bottom-right
aligned, as FlashAttention; `causal` has no default), sliding window, softcap, kv_len from a GPU tensor, and
contiguous / ring / paged kv layouts.
Semantics: docs/attention.md ("The rules"). Kernel choice: attention_planner.py."""

from __future__ import annotations

import json
import math
import os
import threading
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from wgraph import args
from wgraph.errors import ArgumentError, DtypeError, LimitError, PlanError, ShapeError, WgraphError
from wgraph.ops.attention_planner import LAYOUTS, KernelPlan, PlanFacts, max_head_dim, plan
from wgraph.ops.core import OpDef, apply, register, tensor_arg, type_name
from wgraph.ops.cpu_limits import note_cpu_work
from wgraph.kernels.registry import registry
from wgraph.api_types import TensorT
from wgraph.tensor import Tensor, TensorSpec, require

if TYPE_CHECKING:
    from wgraph.device import Caps

U32_MAX = 0xFFFFFFFF
# The most keys the attention kernels index: their key loops step past the last key in u32 (base += a tile, a chunk
# start + a chunk size, each below 2^31), which wraps to key 0 for a kv_len near 2^32 (2^32 - 1 gave wrong rows).
KV_LEN_MAX = 2**31


@attrs.frozen(cache_hash=True)  # a repeated call's params come from a memo: its hash (the template key) once
class AttentionParams:
    """Validated options of one attention call (what `attention` builds from its arguments; a graph node holds
    it). Each field is the `attention` argument of that name: causal, scale, start_pos (None: query 0 sits at
    kv_start + kv_len - S, bottom-right, as FlashAttention), kv_start, kv_len (None: read from the kv_len tensor
    on the GPU), sliding_window, softcap, kv_layout, page_size, variant; window_right is the right side of
    `window` (-1 unbounded) and return_lse whether the log-sum-exp is a second output."""

    causal: bool
    scale: float | None = None
    start_pos: int | None = None
    kv_start: int = 0
    kv_len: int | None = None
    sliding_window: int = 0
    softcap: float = 0.0
    kv_layout: str = "contiguous"
    page_size: int = 0
    variant: str | None = None
    window_right: int = -1   # FlashAttention's window_size[1]: -1 unbounded, else keys up to query_pos + right
    return_lse: bool = False


def require_causal(op: str, causal) -> bool:
    """`causal` as a bool; a WgraphError for None (the signatures make it required: leaving it out is Python's
    TypeError; None is refused with the alignment explained)."""
    if causal is None:
        raise ArgumentError(
            f"{op}: pass causal=True or causal=False (there is no default); causal=True is aligned bottom-right "
            f"as in FlashAttention, so with S queries over L keys query i sits at position L - S + i and sees keys "
            f"0..L - S + i (torch's scaled_dot_product_attention aligns top-left: use wg.ops.sdpa for that)")
    return args.flag(op, "causal", causal)


def call_dtype(q_dtype: str, kv_dtype: str, op: str = "attention") -> str:
    """The kernel dtype family of a call: f32, f16 (all f16) or f16kv (f32 q and out, f16 kv); `op` names the
    call in the error."""
    table = {("f32", "f32"): "f32", ("f16", "f16"): "f16", ("f32", "f16"): "f16kv"}
    if (q_dtype, kv_dtype) not in table:
        raise DtypeError(f"{op}: q {q_dtype} with k/v {kv_dtype} is not supported; "
                         f"use f32/f32, f16/f16 or f32 q with f16 k/v")
    return table[(q_dtype, kv_dtype)]


def window_of(window, sliding_window=0, op: str = "attention") -> tuple[int, int]:
    """FlashAttention's window_size (left, right), -1 unbounded, checked; `sliding_window` w > 0 is the
    left-only shorthand (w - 1, -1)."""
    sliding_window = args.integer(op, "sliding_window", sliding_window)  # any u32: the kernels compare in u32
    left, right = args.window(op, "window", window)
    if sliding_window:
        if left != -1 and left != sliding_window - 1:
            raise ArgumentError(f"{op}: sliding_window={sliding_window} means window left {sliding_window - 1}, "
                                f"but window={window!r}; give one of them")
        left = sliding_window - 1
    return left, right


def check_fields(op: str, p: AttentionParams) -> None:
    """Every field of `p` by its rule (args.py): params built by hand, read from a graph file or given to
    Program.update are checked as the entry point checks its arguments."""
    args.flag(op, "causal", p.causal)
    args.optional_real(op, "scale", p.scale)
    args.optional_integer(op, "start_pos", p.start_pos)
    args.integer(op, "kv_start", p.kv_start)
    args.optional_integer(op, "kv_len", p.kv_len)
    args.integer(op, "sliding_window", p.sliding_window)
    args.normal_real(op, "softcap", p.softcap, or_zero=True)
    args.choice(op, "kv_layout", p.kv_layout, LAYOUTS)
    args.integer(op, "page_size", p.page_size)
    if p.variant is not None:
        args.text(op, "variant", p.variant)
    args.integer(op, "window_right", p.window_right, -1, args.I32_MAX)
    args.flag(op, "return_lse", p.return_lse)


def _kv_span(params: AttentionParams, rows: int, pages: int) -> int:
    """The most keys a query can see; the capacity when kv_len comes from the GPU."""
    cap = min(KV_LEN_MAX, {"contiguous": rows, "ring": rows, "paged": pages * params.page_size}[params.kv_layout])
    return cap if params.kv_len is None else min(params.kv_len, cap)


def validate(params: AttentionParams, specs) -> TensorSpec:
    """Every check that needs no device; the output spec. Errors name the value and the limit."""
    q, k, v, kv_len_t, page_table = specs
    check_fields("attention", params)
    for name, s in (("q", q), ("k", k), ("v", v)):
        if s is None or len(s.shape) != 3:
            batch = ""
            if s is not None and len(s.shape) == 4:
                batch = (" (a batch: wg.ops.attention_kvcache for q [B, S, H, D], wg.ops.sdpa for [B, H, S, D], or "
                         "attention_varlen for sequences packed as [rows, heads, head_dim])")
            raise ShapeError(f"attention: {name} must be [rows, heads, head_dim], got {None if s is None else s.shape}"
                             f"{batch}")
    S, Hq, D = q.shape
    L, Hkv, Dk = k.shape
    if v.shape != k.shape:
        raise ShapeError(f"attention: k {k.shape} and v {v.shape} differ")
    if Dk != D:
        raise ShapeError(f"attention: q head_dim {D} != k/v head_dim {Dk}")
    if min(Hq, D, Hkv) < 1:  # S == 0: an empty output; L == 0: no keys, zeros (docs/errors.md)
        raise ShapeError(f"attention: heads and head_dim must be >= 1; got q {q.shape}, k/v {k.shape}")
    if Hq % Hkv:
        raise ShapeError(f"attention: q heads {Hq} is not a multiple of kv heads {Hkv} (GQA needs Hq % Hkv == 0)")
    if k.dtype != v.dtype:
        raise DtypeError(f"attention: k is {k.dtype} but v is {v.dtype}")
    call_dtype(q.dtype, k.dtype)
    limit = max_head_dim()
    if D > limit:
        raise LimitError(f"attention: head_dim {D} is above every attention kernel's limit (largest: {limit})")
    if params.start_pos is not None and S and params.start_pos + S - 1 > U32_MAX:
        raise LimitError(f"attention: start_pos {params.start_pos} + {S} queries reaches position "
                         f"{params.start_pos + S - 1}; positions are u32 (at most {U32_MAX})")
    if params.kv_len is not None and params.kv_len > KV_LEN_MAX:
        raise LimitError(f"attention: kv_len {params.kv_len} is above {KV_LEN_MAX}, the most keys the attention "
                         f"kernels index (a ring holds the same keys from kv_start + x with kv_len - x)")
    if params.kv_len is None:
        if kv_len_t is None:
            raise ShapeError("attention: kv_len must be an int or a u32 tensor with one value, got nothing")
        kv_len_t.check_u32_scalar(f"attention: kv_len must be an int or a u32 tensor with one value, got "
                                  f"{kv_len_t.dtype} {kv_len_t.shape} (make it with dev.tensor(np.array([n], "
                                  f"np.uint32)))")
    pages = 0
    if params.kv_layout == "paged":
        args.integer("attention", "page_size", params.page_size, 1)
        require(page_table, "u32", page_table is not None and len(page_table.shape) == 1,
                f"attention: paged layout needs page_table, a 1-D u32 tensor; got {page_table}")
        if L % params.page_size:
            raise ShapeError(f"attention: k/v rows {L} are not whole pages of page_size {params.page_size}")
        pages = page_table.shape[0]
        if params.kv_len is not None and params.kv_len > pages * params.page_size:
            raise LimitError(f"attention: page table too short: kv_len {params.kv_len} needs "
                             f"{-(-params.kv_len // params.page_size)} pages of {params.page_size}, the table has {pages}")
    elif page_table is not None:
        raise ShapeError(f"attention: page_table given but kv_layout is {params.kv_layout!r}")
    if params.kv_layout == "contiguous" and params.kv_len is not None and params.kv_len > L:
        raise LimitError(f"attention: kv_len {params.kv_len} is above the k/v buffer's {L} rows")
    if params.kv_layout == "ring" and params.kv_len is not None and params.kv_len > L:
        # The ring keeps only the last L positions: every key a query needs must still be stored.
        # The first query's window reaches furthest back (later queries' windows start later; keys after a query
        # are newer, so stored). A window wider than the ring is fine for queries placed past the keys by start_pos.
        first_q = (params.kv_start + params.kv_len - S) if params.start_pos is None else params.start_pos
        oldest_needed = first_q - params.sliding_window + 1 - params.kv_start
        if params.sliding_window == 0 or oldest_needed < params.kv_len - L:
            w = params.sliding_window
            oldest = max(params.kv_start, first_q - w + 1) if w else params.kv_start
            raise LimitError(f"attention: ring of {L} rows holds the last {L} of kv_len {params.kv_len} keys, but "
                             f"sliding_window {w} lets queries see older ones (the first query, at position "
                             f"{first_q}, sees keys from position {oldest}; the ring holds them from position "
                             f"{params.kv_start + params.kv_len - L})")
    if params.variant is not None and params.variant not in registry():
        raise PlanError(f"attention: unknown variant {params.variant!r}")
    return TensorSpec((S, Hq, D), q.dtype)


def _decode_visible(params: AttentionParams, rows: int, kv_len: int) -> int:
    """Keys the one decode query sees with an int kv_len: key_range() of attention_params.wgsl, on the host,
    so a split-K plan's direct workgroup count equals the chunk count its kernels derive."""
    qpos = params.kv_start + kv_len - 1 if params.start_pos is None else params.start_pos
    rel = qpos - params.kv_start
    lo, hi = 0, kv_len
    if params.causal:
        hi = min(hi, rel + 1)
    if params.sliding_window:
        lo = max(lo, rel - params.sliding_window + 1)
    if params.window_right >= 0:
        hi = min(hi, rel + params.window_right + 1)
    if params.kv_layout == "ring":
        lo = max(lo, kv_len - rows)
    return max(hi, lo) - lo


def plan_facts(params: AttentionParams, specs) -> PlanFacts:
    q, k, _, _, page_table = specs
    S, Hq, D = q.shape
    pages = page_table.shape[0] if page_table is not None else 0
    span = _kv_span(params, k.shape[0], pages)
    capacity = _kv_span(attrs.evolve(params, kv_len=None), k.shape[0], pages)
    if S == 1 and params.kv_len is not None:
        # the query's position comes from the real kv_len: a ring's span is capped at its rows, and a start_pos
        # measured against that cap put the query past the keys (no chunk dispatched: zeros, lse -inf)
        span = _decode_visible(params, k.shape[0], params.kv_len)
    return PlanFacts(phase="decode" if S == 1 else "prefill", dtype=call_dtype(q.dtype, k.dtype), seq_len=S,
                     num_heads=Hq, head_dim=D, kv_span=span, layout=params.kv_layout, num_kv_heads=k.shape[1],
                     kv_capacity=capacity)


def _infer(params: AttentionParams, specs):
    out = validate(params, specs)
    if params.return_lse:
        return out, TensorSpec((out.shape[1], out.shape[0]), "f32")   # lse [Hq, S]
    return (out,)


def uniforms(params: AttentionParams, specs, kplan: KernelPlan) -> dict:
    q, k, _, _, page_table = specs
    S, Hq, D = q.shape
    L, Hkv, _ = k.shape
    cap = {"contiguous": L, "ring": U32_MAX,
           "paged": (page_table.shape[0] * params.page_size) if page_table is not None else 0}[params.kv_layout]
    cap = min(cap, KV_LEN_MAX)   # a GPU kv_len above it is clamped to it and reported
    return {
        "seq_len": S, "num_heads": Hq, "num_kv_heads": Hkv, "head_dim": D,
        "kv_len": params.kv_len or 0, "kv_len_from_buffer": int(params.kv_len is None), "kv_len_cap": cap,
        "start_pos": params.start_pos or 0, "start_pos_from_end": int(params.start_pos is None),
        "kv_start": params.kv_start, "scale": params.scale if params.scale is not None else 1.0 / math.sqrt(D),
        "softcap": params.softcap, "causal": int(params.causal), "sliding_window": params.sliding_window,
        "page_size": params.page_size, "kv_rows": L,
        "num_chunks": kplan.max_chunks, "chunk_size": kplan.chunk_size,
        "window_right": params.window_right, "write_lse": int(params.return_lse),
    }


def constants(params: AttentionParams) -> dict:
    """The attention kernels' overridable constants for a call (attention_params.wgsl, attention_score.wgsl):
    the k/v layout and soft-capping, compiled in because every key step of their loops reads them."""
    return {"KV_RING": params.kv_layout == "ring", "KV_PAGED": params.kv_layout == "paged",
            "SOFTCAP": params.softcap > 0}


def _capacity_chunks(params: AttentionParams, specs, kplan: KernelPlan, caps) -> int:
    """Chunks to size the partial buffers for: the plan's at the kv buffer's capacity (its kernel forced),
    so a Program can later move an int kv_len anywhere up to the capacity without new buffers."""
    if params.kv_len is None:
        return kplan.max_chunks  # planned at the capacity already
    at_capacity = attrs.evolve(params, kv_len=None)
    try:
        return max(kplan.max_chunks, plan(plan_facts(at_capacity, specs), caps, kplan.variant).max_chunks)
    except WgraphError:
        return kplan.max_chunks


def _encode(ctx, params: AttentionParams, inputs, outputs):
    q, k, v, kv_len_t, page_table = inputs
    out = outputs[0]
    lse = outputs[1] if params.return_lse else ctx.fallback("attention.lse")
    if q.shape[0] == 0:
        return []  # no queries: the output is empty and nothing runs
    specs = tuple(None if t is None else t.spec for t in inputs)
    facts = plan_facts(params, specs)
    kplan = plan(facts, ctx.caps, params.variant)
    ctx.chose(kplan)
    if ctx.caps.is_cpu:   # once per template: a repeated call reuses it and says nothing again
        note_cpu_work(ctx.caps, f"attention of {facts.seq_len} queries over {facts.kv_span} keys, {facts.num_heads} "
                      f"heads of {facts.head_dim}", 4.0 * facts.seq_len * facts.kv_span * facts.num_heads * facts.head_dim)
    u = uniforms(params, specs, kplan)
    c = constants(params)
    kv_len_buf = kv_len_t if kv_len_t is not None else ctx.fallback("attention.kv_len")
    pages = page_table if page_table is not None else ctx.fallback("attention.page_table")
    if k.shape[0] == 0:
        # k/v with no rows: no key is ever read, but kernels with vec4 loads declare >= 16-byte bindings
        k = v = ctx.fallback("attention.no_kv", 64)
    reads = {"q": q, "k": k, "v": v, "kv_len_buf": kv_len_buf, "page_table": pages}
    if kplan.max_chunks == 0:
        ((variant, wg),) = kplan.dispatches
        return [ctx.dispatch(variant, uniforms=u, bindings={**reads, "out": out, "lse": lse}, workgroups=wg,
                             label="attention", constants=c)]
    S, Hq, D = q.shape
    slots = S * Hq * _capacity_chunks(params, specs, kplan, ctx.caps)
    part_ml = ctx.scratch((slots * 2,), "f32", "attention.part_ml")
    part_acc = ctx.scratch((slots * D,), "f32", "attention.part_acc")
    partials = {"part_ml": part_ml, "part_acc": part_acc}
    (main, wg), (combine, cwg) = kplan.dispatches
    if registry()[kplan.variant].facts.get("grid") == "splitk":
        return _encode_splitk(ctx, kplan, u, c, reads, partials, out, lse)
    return [
        ctx.dispatch(main, uniforms=u, bindings={**reads, **partials}, workgroups=wg, label="attention.chunks",
                     constants=c),
        ctx.dispatch(combine, uniforms=u, bindings={**partials, "out": out, "lse": lse}, workgroups=cwg,
                     label="attention.combine", constants=c),
    ]


def _encode_splitk(ctx, kplan: KernelPlan, u: dict, c: dict, reads: dict, partials: dict, out, lse):
    """Split-K decode: chunks, combine. The grid is the plan's: with a GPU kv_len, planned at the capacity, and
    the chunks past the length return at once (a pass that wrote indirect counts cost a dependent dispatch,
    ~2-3 us on an H200, more than the idle workgroups)."""
    (main, wg), (combine, cwg) = kplan.dispatches
    lengths = {"kv_len_buf": reads["kv_len_buf"], "page_table": reads["page_table"]}
    return [ctx.dispatch(main, uniforms=u, bindings={**reads, **partials}, workgroups=wg, label="attention.splitk",
                         constants=c),
            ctx.dispatch(combine, uniforms=u, bindings={**lengths, **partials, "out": out, "lse": lse},
                         workgroups=cwg, label="attention.splitk_combine", constants=c)]


ATTENTION = register(OpDef("attention", _infer, _encode, inputs=("q", "k", "v", "kv_len?", "page_table?")))


# ---- kernel paths: forced variants for a whole model ----

class _ActivePaths(threading.local):
    """The KernelPaths entered on this thread. Every thread starts with an empty stack (read on every
    attention call: a missing attribute would cost a raised AttributeError each time)."""

    def __init__(self):
        self.stack: list = []


_active_paths = _ActivePaths()


@attrs.frozen
class KernelPath:
    """Variants by phase and layer: {"prefill": {"default": name, "3": name}, "decode": name}. Use as
    `variant=path` (with `layer=`) or `with path:` to apply it to every attention call on this thread.

    table: that mapping, phase -> a variant name or {layer (a str) or "default": variant name}; build it with
    `kernel_path`, which checks every name against the registry."""

    table: dict = attrs.field(eq=False)

    def variant(self, phase: str, layer=None) -> str | None:
        """The variant name forced for `phase` ("prefill", "decode", ...) at `layer` (its own entry, else the
        phase's "default"), or None where the table names none."""
        entry = self.table.get(phase)
        if isinstance(entry, dict):
            return entry.get(str(layer), entry.get("default")) if layer is not None else entry.get("default")
        return entry

    def __enter__(self):
        _active_paths.stack.append(self)
        return self

    def __exit__(self, *exc):
        _active_paths.stack.pop()


def kernel_path(spec: dict[str, Any] | str | os.PathLike[str]) -> KernelPath:
    """A KernelPath from a dict or a .toml / .json file; every name is checked against the registry.

    spec: {"prefill": name or {layer: name, "default": name}, "decode": ...}, or the path of a .toml or .json
    file holding that mapping."""
    if isinstance(spec, (str, Path)):
        path = Path(spec)
        try:
            text = path.read_text()
            spec = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except (OSError, ValueError) as e:  # a missing file, not UTF-8, not TOML / JSON
            raise PlanError(f"kernel_path: spec={str(path)!r} cannot be read as a kernel path file "
                            f"({type(e).__name__}: {e})") from None
    if not isinstance(spec, dict):
        raise args.fail("kernel_path", "spec", spec, "a dict, or the path of a .toml or .json file holding one")
    table = {}
    for phase, entry in dict(spec).items():
        if phase not in ("prefill", "decode"):
            raise PlanError(f"kernel_path: phase {phase!r} is not prefill or decode")
        names = entry.values() if isinstance(entry, dict) else [entry]
        for name in names:
            k = registry().get(name) if isinstance(name, str) else None   # a list or dict (any JSON / TOML) too
            if k is None or k.op != "attention" or k.facts.get("phase") != phase:
                raise PlanError(f"kernel_path: {name!r} is not a {phase} attention variant")
        table[phase] = {_layer_key(phase, a): b for a, b in entry.items()} if isinstance(entry, dict) else entry
    return KernelPath(table)


def _layer_key(phase: str, key) -> str:
    """A phase table's key as KernelPath.variant looks it up: "default", or a layer index as its decimal str (an
    int key 3, or TOML / JSON's "3"). Anything else is refused: "defualt", True, 3.0 or "layer3" were kept as
    str(key), which no layer's lookup (str(layer)) ever matches, so the variant was silently never forced."""
    plain = args.plain_str(key)
    if plain == "default":
        return plain
    if args.is_int(key) and 0 <= key <= args.U32_MAX:
        return str(int(key))
    if plain is not None and plain.isascii() and plain.isdigit() and len(plain.lstrip("0")) <= 10 \
            and int(plain) <= args.U32_MAX:
        return str(int(plain))   # "03" is layer 3's
    raise PlanError(f"kernel_path: {phase} key {args.show(key)} is not 'default' or a layer index (an integer in "
                    f"[0, {args.U32_MAX}], or its decimal str as a TOML / JSON key)")


def _resolve_variant(variant, seq_len: int, layer) -> str | None:
    if variant is None:
        stack = _active_paths.stack
        if not stack:
            return None  # the common case: no variant forced
        variant = stack[-1]
    if isinstance(variant, KernelPath):
        return variant.variant("decode" if seq_len == 1 else "prefill", layer)
    return variant


# A repeated call (a decode step, a recorded layer) passes the same plain values again: its AttentionParams
# comes from this memo instead of being checked and built again (~2.8 -> ~1.1 µs on lavapipe). The key holds
# every value with its type, so 16, 16.0, True and np.int64(16) never share an entry. Only values of
# immutable builtin types enter (their checks and conversions depend on nothing else; others, numpy integers
# included, take the full path), and only calls whose checks passed are remembered: a bad value still
# raises, naming itself. 0.0 and -0.0 share an entry, as they share AttentionParams equality. `layer` is not
# in the key (only the variant it resolves to is): it is checked before the memo, where None costs one test.
_MEMO_TYPES = frozenset({int, float, bool, str, type(None)})
_PARAMS_MEMO: dict = {}
_PARAMS_MEMO_CAPACITY = 1024  # a decode loop with an int kv_len adds one entry per length


def _params(op, q, k, kv_len, causal, scale, start_pos, kv_start, sliding_window, softcap, kv_layout, page_table,
            page_size, variant, layer, window=(-1, -1), return_lse=False):
    try:   # free when q has a shape (a Tensor, a TensorSpec): the memo's hit path pays nothing for the check
        rows = q.shape[0]
    except (AttributeError, TypeError, IndexError):
        tensor_arg(op, "q", q)   # not a Tensor: ShapeError naming q (a 0-d one is validate's to name)
        rows = 0
    if layer is not None:
        args.integer(op, "layer", layer)
    if type(kv_layout) is not str:   # named by its rule before anything compares it: an array == "paged" is an array
        kv_layout = args.choice(op, "kv_layout", kv_layout, LAYOUTS)   # np.str_("paged"): the plain str from here
    if kv_len is None:
        kv_len = _default_kv_len(k, kv_layout, page_table, page_size)
    if isinstance(kv_len, (Tensor, TensorSpec)):
        kv_len_t, n = kv_len, None
    else:
        kv_len_t, n = None, kv_len
    variant = _resolve_variant(variant, rows, layer)  # reads the thread's KernelPath: not memoised
    key = None
    if type(window) is tuple:
        values = (n, causal, scale, start_pos, kv_start, sliding_window, softcap, kv_layout, page_size, variant,
                  return_lse, *window)
        types = tuple(map(type, values))
        if _MEMO_TYPES.issuperset(types):
            key = (values, types)
            params = _PARAMS_MEMO.get(key)
            if params is not None:
                return params, kv_len_t
    causal = require_causal(op, causal)
    kv_layout = args.choice(op, "kv_layout", kv_layout, LAYOUTS)
    page_size = args.integer(op, "page_size", page_size, 1 if kv_layout == "paged" else 0)
    left, right = window_of(window, sliding_window, op)
    if variant is not None and type(variant) is not str:
        plain = args.plain_str(variant)   # np.str_ by its characters; the params hold the plain str
        if plain is None:
            raise args.fail(op, "variant", variant, "None, a variant name or a KernelPath")
        variant = plain
    params = AttentionParams(
        causal=causal, scale=args.optional_real(op, "scale", scale),
        start_pos=args.optional_integer(op, "start_pos", start_pos), kv_start=args.integer(op, "kv_start", kv_start),
        kv_len=_kv_len_arg(op, n), sliding_window=left + 1,
        softcap=args.normal_real(op, "softcap", softcap, or_zero=True), kv_layout=kv_layout, page_size=page_size, variant=variant,
        window_right=right, return_lse=args.flag(op, "return_lse", return_lse))
    if key is not None:
        if len(_PARAMS_MEMO) >= _PARAMS_MEMO_CAPACITY:
            _PARAMS_MEMO.clear()
        _PARAMS_MEMO[key] = params
    return params, kv_len_t


def _kv_len_arg(op: str, n) -> int | None:
    """An int kv_len by args' rule; the rule it names says a u32 GPU tensor is the other form (a numpy array of
    one id is host data, not that tensor)."""
    try:
        return args.optional_integer(op, "kv_len", n)
    except ArgumentError:
        raise args.fail(op, "kv_len", n, f"an integer in [0, {args.U32_MAX}], a u32 tensor of one value (on the "
                                         f"GPU: dev.tensor(np.array([n], np.uint32))) or None") from None


def _default_kv_len(k, kv_layout, page_table, page_size):
    """kv_len left out: every row of k, or of the pages the table maps (a bad page_size is named later)."""
    shape = getattr(k, "shape", None)   # one read of the property: every call without kv_len comes here
    if shape is None:
        return None  # k is not a tensor: apply names it
    # a table without a 1-D shape (a list, a 0-d tensor) raised AttributeError / IndexError here: its own check
    # (apply's, validate's) names it
    table_shape = getattr(page_table, "shape", None)
    if (kv_layout == "paged" and isinstance(table_shape, tuple) and len(table_shape) == 1 and args.is_int(page_size)
            and page_size > 0):
        return min(shape[0], table_shape[0] * int(page_size))
    return shape[0]


def attention(q: TensorT, k: TensorT, v: TensorT, *, causal: bool, scale: float | None = None,
              start_pos: int | None = None, kv_start: int = 0, kv_len: int | TensorT | None = None,
              sliding_window: int = 0, softcap: float = 0.0, kv_layout: str = "contiguous",
              page_table: TensorT | None = None, page_size: int = 0, variant: str | KernelPath | None = None,
              layer: int | None = None, out: TensorT | None = None, window: tuple[int, int] = (-1, -1),
              return_lse: bool = False) -> Any:
    """softmax(q k^T * scale [+ masks]) v for one sequence (FlashAttention's rules: docs/attention.md).
    Returns out [S, Hq, D] in q's dtype (a Tensor, or a Value in a graph), or (out, lse) with return_lse.

    q: queries [S, Hq, D] (f32 or f16). k, v: keys and values [L, Hkv, D] (f32 or f16, one dtype; f32 q with f16
        k/v is the f16kv family); Hq a multiple of Hkv (q head h reads kv head h // (Hq // Hkv)).
    causal: required, True or False. True masks key j of query i when the key's position is after the query's;
        positions are bottom-right aligned (with S < kv_len the queries are the last S positions).
    scale: the scores' factor; None: 1 / sqrt(D).
    start_pos: the absolute position of query 0 (query i sits at start_pos + i); None: kv_start + kv_len - S.
    kv_start: the absolute position of key 0 (key j sits at kv_start + j), for caches that do not start at 0.
    kv_len: how many keys to attend to: an int (default: every row of k, or of the pages the table maps) or a
        u32 tensor with one value, read by the kernel at dispatch time (a recorded decode step replays as the
        cache grows).
    sliding_window: w > 0 masks keys at or before query_pos - w (the left-only shorthand of window=(w - 1, -1));
        0 is off.
    softcap: c > 0 caps the scaled scores as c * tanh(s / c) (Gemma 2); 0 is off.
    kv_layout: how k/v rows hold key positions: "contiguous" (key j at row j), "ring" (a ring of L rows: key
        position p at row p % L; only the last L keys are stored, so kv_len may exceed L when the window keeps
        every query within them: an int kv_len past that is a LimitError, a GPU one is reported (GpuValueError at
        the next sync; keys older than the ring count as masked)) or "paged" (rows in pages of page_size, mapped
        by page_table).
    page_table: "paged" only: a 1-D u32 tensor; key j is at row page_table[j // page_size] * page_size +
        j % page_size.
    page_size: "paged" only: rows per page (k/v rows must be whole pages); ignored otherwise.
    variant: force a registry kernel by name, or a KernelPath that names one per phase and layer; None: planned.
    layer: the layer index a KernelPath's per-layer entry is looked up with (ignored without one).
    out: a tensor (in a graph: a state value) of the output's shape and dtype to write into instead of a new one.
    window: FlashAttention's window_size (left, right): keys before query_pos - left or after query_pos + right
        are masked; -1 leaves a side unbounded (with causal=True the right side is 0 whatever it says).
    return_lse: also return the log-sum-exp of the visible scores, lse [Hq, S] f32 (-inf for a query that sees
        no key), to merge partial attentions exactly."""
    params, kv_len_t = _params("attention", q, k, kv_len, causal, scale, start_pos, kv_start, sliding_window,
                               softcap, kv_layout, page_table, page_size, variant, layer, window, return_lse)
    return apply(ATTENTION, params, (q, k, v, kv_len_t, page_table), out=out)


def attention_plan(q: Tensor | TensorSpec, k: Tensor | TensorSpec, v: Tensor | TensorSpec, *, causal: bool,
                   caps: Caps | None = None, scale: float | None = None, start_pos: int | None = None,
                   kv_start: int = 0, kv_len: int | Tensor | TensorSpec | None = None, sliding_window: int = 0,
                   softcap: float = 0.0, kv_layout: str = "contiguous", page_table: Tensor | TensorSpec | None = None,
                   page_size: int = 0, variant: str | KernelPath | None = None, layer: int | None = None,
                   window: tuple[int, int] = (-1, -1)) -> KernelPlan:
    """The KernelPlan (variant, tier, reason, workgroups) `attention` would use for these arguments, without
    running anything.

    q, k, v, kv_len, page_table: as `attention`'s, each a Tensor or a TensorSpec (shape and dtype only).
    causal, scale, start_pos, kv_start, sliding_window, softcap, kv_layout, page_size, variant, layer, window:
        as `attention`'s.
    caps: the device capabilities to plan for (dev.caps, Caps.synthetic(...)); None: q's device's, or the
        default device's."""
    params, kv_len_t = _params("attention_plan", q, k, kv_len, causal, scale, start_pos, kv_start, sliding_window,
                               softcap, kv_layout, page_table, page_size, variant, layer, window)
    given = []
    for name, t in (("q", q), ("k", k), ("v", v), ("kv_len", kv_len_t), ("page_table", page_table)):
        if t is not None and not isinstance(t, (Tensor, TensorSpec)):
            raise ShapeError(f"attention_plan: {name} must be a Tensor or a TensorSpec, got {type_name(t)}")
        given.append(t.spec if isinstance(t, Tensor) else t)
    specs = tuple(given)
    validate(params, specs)
    from wgraph.device import Caps, default_device  # the device module imports the ops

    if caps is None:
        caps = q.device.caps if isinstance(q, Tensor) else default_device().caps
    elif not isinstance(caps, Caps):
        raise args.fail("attention_plan", "caps", caps, "None or a Caps (dev.caps, Caps.synthetic(...))")
    return plan(plan_facts(params, specs), caps, params.variant)
