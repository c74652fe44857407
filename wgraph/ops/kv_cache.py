"""KV-cache ops: append rows to a contiguous, ring or paged cache, and int8/int4 quantization of K/V rows.

Quantized format (symmetric, per (row, kv head)): scale = max|x| / QMAX rounded *up* to f16 (QMAX 127 for int8,
7 for int4), q = round(x / scale); `VALS_PER_WORD` signed values per u32 (4 x int8 or 8 x int4), value k of a
word in bits [BITS*k, BITS*(k+1)). Shapes: x [n, Hkv, D] -> packed u32 [n, Hkv, D / VALS_PER_WORD] and scales
f16 [n, Hkv]. Rounding the scale up keeps |x| / scale <= QMAX, so no value clamps and |x - q*scale| <= scale/2.
"""

from __future__ import annotations

from typing import Any

import attrs

from wgraph import args
from wgraph.api_types import DTypeLike, TensorT
from wgraph.errors import AliasingError, DtypeError, LimitError, ShapeError
from wgraph.args import U32_MAX
from wgraph.ops.core import OpDef, apply, ceil_div, register, tensor_arg
from wgraph.kernels.registry import kernel, select_variant
from wgraph.tensor import Tensor, TensorSpec, require

LAYOUTS = {"contiguous": 0, "ring": 1, "paged": 2}
QUANT_MODES = {"int8": (8, 4, 127), "int4": (4, 8, 7)}  # bits, values per u32, qmax


def quant_format(mode: str) -> tuple[int, int, int]:
    """(bits, values per u32, qmax) of a quantization mode."""
    # np.str_("int8") by its characters, as args.choice reads one
    plain = args.plain_str(mode)
    if plain is None or plain not in QUANT_MODES:
        raise ShapeError(f"quantization mode {mode!r} is not one of {sorted(QUANT_MODES)}")
    return QUANT_MODES[plain]


@attrs.frozen
class WriteParams:
    """Where rows go: position pos + r (plus the value of the pos tensor, when given) of a cache `layout`.
    src_ring > 0 reads the source as a ring indexed by the same position (a hot -> cold move); otherwise
    the source rows are src_row0 + r. n_rows = None means every row of the source."""

    layout: str
    pos: int
    page_size: int = 0
    n_rows: int | None = None
    src_ring: int = 0
    src_row0: int = 0
    mode: str | None = None  # None: plain copy; "int8"/"int4": quantize into packed + scales


def _cache_capacity(params: WriteParams, rows: int, table: TensorSpec | None, op: str) -> int:
    """Logical positions the cache holds; checks the layout's extra inputs."""
    if params.layout not in LAYOUTS:
        raise ShapeError(f"{op}: layout {params.layout!r} is not one of {sorted(LAYOUTS)}")
    if params.layout != "paged":
        if table is not None:
            raise ShapeError(f"{op}: page_table is only for layout='paged', got layout={params.layout!r}")
        return rows
    if table is None:
        raise ShapeError(f"{op}: layout='paged' needs page_table= (a u32 tensor of physical page ids)")
    require(table, "u32", len(table.shape) == 1,
            f"{op}: page_table must be a 1-D u32 tensor, got {table.shape} {table.dtype}")
    if params.page_size <= 0 or rows % params.page_size:
        raise ShapeError(f"{op}: a paged cache of {rows} rows needs a page_size > 0 that divides it, "
                         f"got page_size={params.page_size}")
    return table.shape[0] * params.page_size


def _check_pos_tensor(spec: TensorSpec | None, op: str):
    if spec is not None:
        spec.check_u32_scalar(f"{op}: a GPU position must be a u32 tensor with one value, got {spec.shape} "
                              f"{spec.dtype}")


I32_MAX = 2**31 - 1  # the kv kernels compute positions in i32 (a negative one is a row to skip)


def _check_positions(params: WriteParams, n: int, capacity: int, has_pos_tensor: bool, op: str):
    """With an int position (and no pos tensor) every written position must fit: clear errors, not dropped rows."""
    if n and params.pos + n - 1 > I32_MAX:
        raise LimitError(f"{op}: rows at positions {params.pos}..{params.pos + n - 1} (pos + pos_offset + row) pass "
                         f"{I32_MAX}, the largest position the kv kernels address (any layout, rings included)")
    if params.layout == "ring" and n > capacity:
        raise LimitError(f"{op}: {n} rows into a ring of {capacity} rows would overwrite rows of the same append")
    if has_pos_tensor:
        return  # known on the GPU only; the kernel writes nothing outside the cache
    first = params.pos
    # a ring too: an int pos below 0 (Program.update, a graph file) wrote the rows from 0 on and skipped the rest
    if first < 0:
        raise LimitError(f"{op}: position {first} (pos + pos_offset) is negative")
    if params.layout == "ring":
        return   # any position >= 0 has a row
    # 0 rows may append at the end (first == capacity), not past it: that was refused as "cache full ... needs
    # capacity + 1 rows" though nothing is written
    if first > capacity or (first == capacity and n > 0):
        raise LimitError(f"{op}: position {first} (pos + pos_offset) is beyond the cache capacity of {capacity} rows")
    if first + n > capacity:
        raise LimitError(f"{op}: cache full: writing {n} rows at position {first} (pos + pos_offset) needs "
                         f"{first + n} rows, the cache holds {capacity}")


def _infer_write(params: WriteParams, specs):
    src, dst, scales, table, pos_t = specs
    op = "kv_append" if params.mode is None else "kv_append_quantized"
    _check_write_fields(op, params)
    if len(src.shape) != 3:
        raise ShapeError(f"{op}: new rows must be [n, kv_heads, head_dim], got {src.shape}")
    n_src, heads, dim = src.shape
    if params.mode is None:
        if dst.shape[1:] != (heads, dim) or len(dst.shape) != 3:
            raise ShapeError(f"{op}: cache {dst.shape} does not match rows {src.shape} (kv_heads, head_dim)")
        if dst.dtype != src.dtype:
            raise DtypeError(f"{op}: cache dtype {dst.dtype} differs from the new rows' {src.dtype}")
        if dst.dtype == "bf16" and heads * dim % 2:
            raise ShapeError(f"{op}: a bf16 row is copied as u32 words of two elements, so kv_heads x head_dim must be "
                             f"even; got {src.shape}")
        select_variant("kv_append", output_dtype=dst.dtype)
    else:
        _check_packed(params.mode, dst, scales, (dst.shape[0] if len(dst.shape) else 0, heads, dim), op)
        select_variant("kv_quantize", mode=params.mode, src_dtype=src.dtype)
    n = n_src if params.n_rows is None else params.n_rows
    if params.src_ring == 0 and params.src_row0 + n > n_src:
        raise ShapeError(f"{op}: rows {params.src_row0}..{params.src_row0 + n} of a source with {n_src} rows")
    _check_pos_tensor(pos_t, op)
    capacity = _cache_capacity(params, dst.shape[0], table, op)
    _check_positions(params, n, capacity, pos_t is not None, op)
    return ()


def _check_write_fields(op: str, p: WriteParams) -> None:
    """Every field of `p` by its rule (args.py), for params from a graph file or Program.update. pos holds the
    GPU position's offset when a position tensor is given: it may be negative."""
    args.choice(op, "layout", p.layout, tuple(LAYOUTS))
    args.integer(op, "pos", p.pos, -args.I32_MAX - 1, U32_MAX)
    args.integer(op, "page_size", p.page_size)
    args.optional_integer(op, "n_rows", p.n_rows)
    args.integer(op, "src_ring", p.src_ring)
    args.integer(op, "src_row0", p.src_row0)
    args.choice(op, "mode", p.mode, (None,) + tuple(QUANT_MODES))


def _check_packed(mode: str, packed: TensorSpec, scales: TensorSpec | None, shape: tuple, op: str):
    """packed must be u32 [n, H, D / vpw] and scales f16 [n, H] for rows of `shape` = (n, H, D)."""
    bits, vpw, _ = quant_format(mode)
    n, heads, dim = shape
    if dim % vpw:
        raise ShapeError(f"{op}: head_dim {dim} must be a multiple of {vpw} for {mode} ({vpw} values per u32)")
    want = (n, heads, dim // vpw)
    require(packed, "u32", packed.shape == want, f"{op}: packed {mode} data must be u32 {want} for rows {shape} "
            f"(n, kv_heads, head_dim), got {packed.dtype} {packed.shape}")
    got = None if scales is None else f"{scales.dtype} {scales.shape}"
    require(scales, "f16", scales is not None and scales.shape == (n, heads),
            f"{op}: scales must be f16 {(n, heads)} (one per row and kv head) for packed {packed.shape}, got {got}")


def _kernel_capacity(layout: str, rows: int, table, page_size: int) -> int:
    """The `capacity` uniform of the kv kernels (kv_common.wgsl): the cache's rows, or the positions a page table
    maps, at most 2^31. No position past I32_MAX is ever written (the host and the kernels refuse it), so the cap
    changes nothing but the u32 field: a table of 2^20 + 2 pages of 4096 rows maps 2^32 + 8192 positions, and the
    field's packing raised ("uniform field KVAppendParams.capacity=4294975488 is outside u32") for a call writing
    position 5."""
    if layout != "paged":
        return rows   # a ring's rows are its modulus
    return min(table.shape[0] * page_size, I32_MAX + 1)


def _write_dispatch(ctx, params: WriteParams, src, dst, scales, table, pos_t):
    n = src.shape[0] if params.n_rows is None else params.n_rows
    heads, dim = src.shape[1], src.shape[2]
    capacity = _kernel_capacity(params.layout, dst.shape[0], table, params.page_size)
    common = {
        "n_rows": n, "capacity": capacity, "dst_layout": LAYOUTS[params.layout], "page_size": max(1, params.page_size),
        "pos": params.pos, "use_pos_buf": int(pos_t is not None), "src_layout": int(params.src_ring > 0),
        "src_ring": max(1, params.src_ring), "src_row0": params.src_row0,
    }
    table = table if table is not None else ctx.fallback("kv.page_table")
    pos_t = pos_t if pos_t is not None else ctx.fallback("kv.pos")
    if params.mode is None:
        variant = select_variant("kv_append", output_dtype=dst.dtype)
        row_words = heads * dim // kernel(variant).limits["elems_per_word"]  # bf16 rows copy as u32 words
        total = n * row_words
        return ctx.dispatch(variant, uniforms=dict(common, row_elems=row_words, cache_rows=dst.shape[0]),
                            bindings={"src": src, "dst": dst, "page_table": table, "pos_buf": pos_t},
                            workgroups=ctx.grid(ceil_div(total, kernel(variant).threads)), label="kv_append")
    variant = select_variant("kv_quantize", mode=params.mode, src_dtype=src.dtype)
    return ctx.dispatch(variant, uniforms=dict(common, kv_heads=heads, head_dim=dim),
                        bindings={"src": src, "packed": dst, "scales": scales, "page_table": table, "pos_buf": pos_t},
                        workgroups=ctx.grid(ceil_div(n * heads, kernel(variant).threads)), label=f"kv_quantize_{params.mode}")


def _encode_write(ctx, params: WriteParams, inputs, outputs):
    src, dst, scales, table, pos_t = inputs
    return [_write_dispatch(ctx, params, src, dst, scales, table, pos_t)]


# Not registered: only TieredKVCache's immediate moves call it (a graph cannot hold TieredKVCache's tensors), so no
# graph node is a kv_write. kv_append's k and v writes are one node (KV_APPEND below); a file of the older form, two
# kv_write nodes, is refused by name (RETIRED_OPS in graph/export.py).
KV_WRITE = OpDef("kv_write", _infer_write, _encode_write,
                 inputs=("k_new / v_new", "cache", "scales?", "page_table?", "pos?"))


@attrs.frozen
class KVAppendParams:
    """kv_append's (and kv_append_quantized's): where k_new's and v_new's rows go, one position for both. One
    node holds both writes, so a graph file or Program.update moves the k rows and the v rows together (as two
    nodes, updating one moved only its rows: k at the new position, v at the old one, silently)."""

    layout: str
    pos: int
    page_size: int = 0
    mode: str | None = None  # None: kv_append (plain copies); "int8"/"int4": kv_append_quantized

    def write(self) -> WriteParams:
        return WriteParams(self.layout, self.pos, self.page_size, mode=self.mode)


def _append_pairs(mode: str | None, inputs) -> tuple[tuple, tuple]:
    """The k write's and the v write's (src, dst, scales, page_table, pos) from a kv_append node's inputs."""
    if mode is None:
        k_new, v_new, kc, vc, table, pos_t = inputs
        return (k_new, kc, None, table, pos_t), (v_new, vc, None, table, pos_t)
    k_new, v_new, kp, ks, vp, vs, table, pos_t = inputs
    return (k_new, kp, ks, table, pos_t), (v_new, vp, vs, table, pos_t)


def _infer_append(quantized: bool):
    op = "kv_append_quantized" if quantized else "kv_append"

    def infer(params: KVAppendParams, specs):
        # a graph file's or Program.update's params: the mode must be the op's kind (the inputs differ)
        args.choice(op, "mode", params.mode, tuple(QUANT_MODES) if quantized else (None,))
        pairs = _append_pairs(params.mode, specs)
        _check_kv_pair(op, (pairs[0][0], pairs[1][0]), (pairs[0][1], pairs[1][1]))
        for pair in pairs:
            _infer_write(params.write(), pair)
        return ()
    return infer


def _encode_append(ctx, params: KVAppendParams, inputs, outputs):
    return [_write_dispatch(ctx, params.write(), *pair) for pair in _append_pairs(params.mode, inputs)]


KV_APPEND = register(OpDef("kv_append", _infer_append(False), _encode_append,
                           inputs=("k_new", "v_new", "k_cache", "v_cache", "page_table?", "pos?")))
KV_APPEND_QUANTIZED = register(OpDef("kv_append_quantized", _infer_append(True), _encode_append,
                                     inputs=("k_new", "v_new", "k_packed", "k_scales", "v_packed", "v_scales",
                                             "page_table?", "pos?")))


def _as_pos(op: str, pos, pos_offset) -> tuple[int, Tensor | None]:
    """(int position, None) or (pos_offset, the GPU position tensor). pos_offset may be negative (TieredKVCache
    moves the row leaving its ring from kv_len - 1 - window); a GPU row position below 0 is skipped (a move's
    silently, an append's reported on the device error flag)."""
    pos_offset = args.integer(op, "pos_offset", pos_offset, -args.I32_MAX - 1, args.I32_MAX)
    if isinstance(pos, Tensor) or getattr(pos, "_wgraph_symbol_", False):
        return pos_offset, pos
    if not args.is_int(pos) or not 0 <= pos <= U32_MAX:   # a position, as a GPU one (a u32), before the offset
        raise args.fail(op, "pos", pos, f"an integer in [0, {U32_MAX}] or a u32 GPU tensor")
    return args.integer(op, "pos + pos_offset", int(pos) + pos_offset, 0, U32_MAX), None


def kv_write(src, dst, pos, *, layout="contiguous", page_table=None, page_size=0, pos_offset=0, n_rows=None,
             src_ring=0, src_row0=0, mode=None, scales=None, op: str = "kv_write"):
    """Write rows of `src` into one cache tensor in place (the primitive under kv_append and TieredKVCache)."""
    params = _write_params(op, pos, layout, page_size, pos_offset, n_rows, src_ring, src_row0, mode)
    apply(KV_WRITE, params[0], (src, dst, scales, page_table, params[1]))


def _write_params(op, pos, layout, page_size, pos_offset, n_rows, src_ring, src_row0, mode):
    """(WriteParams, GPU position or None) from a kv call's arguments, each checked by its rule."""
    base, pos_t = _as_pos(op, pos, pos_offset)
    params = WriteParams(args.choice(op, "layout", layout, tuple(LAYOUTS)), base,
                         args.integer(op, "page_size", page_size), args.optional_integer(op, "n_rows", n_rows),
                         args.integer(op, "src_ring", src_ring), args.integer(op, "src_row0", src_row0),
                         args.choice(op, "mode", mode, (None,) + tuple(QUANT_MODES)))
    return params, pos_t


def kv_append(cache: tuple[TensorT, TensorT], k_new: TensorT, v_new: TensorT, pos: int | TensorT, *,
              layout: str = "contiguous", page_table: TensorT | None = None, page_size: int = 0,
              pos_offset: int = 0) -> None:
    """Write k_new, v_new into the cache at positions pos .. pos + n - 1, in place (one op of two dispatches,
    validated together: an error writes neither; in a graph one node, whose params place both).

    cache: (k_cache, v_cache) [rows, Hkv, D] tensors (in a graph: state values), f32, f16 or bf16 (bf16: Hkv * D
        even, rows copied as u32 words).
    k_new, v_new: the new rows [n, Hkv, D], the cache's dtype.
    pos: the position of the first new row: an int (checked: a full cache or a position beyond its capacity is a
        LimitError) or a u32 GPU tensor with one value read at dispatch time (plus pos_offset), so one recording
        replays for any position; rows a GPU position puts outside the cache are not written and are reported
        on the device error flag (dev.check_errors() and the next readback raise GpuValueError).
    layout: "contiguous" (row = position), "ring" (row = position % rows) or "paged" (row =
        page_table[position // page_size] * page_size + position % page_size).
    page_table: "paged" only: a 1-D u32 tensor of page ids.
    page_size: "paged" only: rows per page; ignored otherwise.
    pos_offset: added to pos (an int or the GPU value): the position written is pos + pos_offset.
    """
    k_cache, v_cache = _pair("kv_append", "cache", cache)
    _check_kv_pair("kv_append", (k_new, v_new), (k_cache, v_cache))
    _check_distinct("kv_append", "cache", k_cache, v_cache)
    w, pos_t = _write_params("kv_append", pos, layout, page_size, pos_offset, None, 0, 0, None)
    apply(KV_APPEND, KVAppendParams(w.layout, w.pos, w.page_size), (k_new, v_new, k_cache, v_cache, page_table, pos_t))


def kv_append_quantized(cache: tuple[tuple[TensorT, TensorT], tuple[TensorT, TensorT]], k_new: TensorT,
                        v_new: TensorT, pos: int | TensorT, *, mode: str, layout: str = "contiguous",
                        page_table: TensorT | None = None, page_size: int = 0, pos_offset: int = 0) -> None:
    """kv_append into a quantized cache, quantizing the new rows on the way (as kv_quantize does).

    cache: ((k_packed, k_scales), (v_packed, v_scales)): packed u32 [rows, Hkv, D / values per word] and f16
        scales [rows, Hkv] for keys and values.
    k_new, v_new: the new rows [n, Hkv, D] (f32 or f16).
    mode: "int8" or "int4", the cache's packing (checked against the packed shapes).
    pos: the position of the first new row: an int (checked: a full cache or a position beyond its capacity is a
        LimitError) or a u32 GPU tensor with one value read at dispatch time (plus pos_offset), so one recording
        replays for any position; rows a GPU position puts outside the cache are not written and are reported
        on the device error flag (dev.check_errors() and the next readback raise GpuValueError).
    layout: "contiguous" (row = position), "ring" (row = position % rows) or "paged" (row =
        page_table[position // page_size] * page_size + position % page_size).
    page_table: "paged" only: a 1-D u32 tensor of page ids.
    page_size: "paged" only: rows per page; ignored otherwise.
    pos_offset: added to pos (an int or the GPU value): the position written is pos + pos_offset.
    """
    op = "kv_append_quantized"
    (kp, ks), (vp, vs) = (_pair(op, name, c) for name, c in zip(("cache[0]", "cache[1]"), _pair(op, "cache", cache)))
    _check_kv_pair(op, (k_new, v_new), (kp, vp))
    _check_distinct(op, "cache", kp, vp)
    _check_distinct(op, "scales", ks, vs)
    w, pos_t = _write_params(op, pos, layout, page_size, pos_offset, None, 0, 0,
                             args.choice(op, "mode", mode, tuple(QUANT_MODES)))
    apply(KV_APPEND_QUANTIZED, KVAppendParams(w.layout, w.pos, w.page_size, w.mode),
          (k_new, v_new, kp, ks, vp, vs, page_table, pos_t))


def _pair(op: str, name: str, value) -> tuple:
    """A (k, v) pair: a tuple or list of two."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return tuple(value)
    raise args.fail(op, name, value, "a pair (k, v)")


def _check_kv_pair(op: str, new: tuple, caches: tuple) -> None:
    """k and v go to the same positions: as many new rows each, caches of one dtype and as many rows (one
    layout and page table serve both). Each write's own shapes are checked with it (_infer_write). Takes tensors,
    graph values or specs (the op's infer checks a graph file's)."""
    (kn, vn), (kc, vc) = new, caches
    shapes = [getattr(x, "shape", None) for x in (kn, vn, kc, vc)]
    if any(s is None or len(s) < 1 for s in shapes):
        return   # not tensors: each write names what is wrong
    if shapes[0][0] != shapes[1][0]:
        raise ShapeError(f"{op}: k_new has {shapes[0][0]} rows and v_new {shapes[1][0]}; they are written at the "
                         f"same positions, so they must have the same number of rows")
    if shapes[2][0] != shapes[3][0]:
        raise ShapeError(f"{op}: the k cache has {shapes[2][0]} rows and the v cache {shapes[3][0]}; they must have "
                         f"the same rows (one layout and page table serve both)")
    if kc.dtype != vc.dtype:
        raise DtypeError(f"{op}: the k cache is {kc.dtype} and the v cache {vc.dtype}; they must have one dtype "
                         f"(attention reads k and v in one dtype)")


def _check_distinct(op: str, what: str, k, v) -> None:
    """AliasingError where the k and v `what` are one buffer (two views of it, or two graph values over one base):
    k and v are written by two dispatches at the same rows, so the v write would overwrite the k rows."""
    if isinstance(k, Tensor) and isinstance(v, Tensor):
        same = k.buffer is v.buffer
    else:
        graph = getattr(k, "graph", None)
        same = (getattr(k, "_wgraph_symbol_", False) and getattr(v, "_wgraph_symbol_", False) and v.graph is graph
                and graph.base[k.name] == graph.base[v.name])
    if same:
        raise AliasingError(f"{op}: the k {what} and the v {what} are one buffer ({k!r} and {v!r}); the v rows "
                            f"would overwrite the k rows: give each its own tensor")


def _head_dim(d: int) -> int:
    return args.integer("QuantizedKV", "head_dim", d, 1)


@attrs.frozen
class QuantizedKV:
    """Quantized rows as one value, so kv_dequantize cannot read int4 data as int8. Checked when built.

    packed: u32 [n, Hkv, head_dim / vpw] (a Tensor or a graph Value; vpw values per word: 4 for int8, 8 for int4).
    scales: f16 [n, Hkv], one per row and head.
    mode: "int8" or "int4", the packing.
    head_dim: the rows' head dim D."""

    packed: Any  # a Tensor (or a graph Value)
    scales: Any
    mode: str
    head_dim: int = attrs.field(converter=_head_dim)

    def __attrs_post_init__(self):
        for name in ("packed", "scales"):
            tensor_arg("QuantizedKV", name, getattr(self, name))
        # the plain str choice returns (np.str_("int8") by its characters), as a call's params hold it
        object.__setattr__(self, "mode", args.choice("QuantizedKV", "mode", self.mode, tuple(QUANT_MODES)))
        shape = self.packed.shape
        rows = (shape[0], shape[1], self.head_dim) if len(shape) == 3 else (0, 0, self.head_dim)
        _check_packed(self.mode, TensorSpec(shape, self.packed.dtype), TensorSpec(self.scales.shape, self.scales.dtype),
                      rows, "QuantizedKV")


@attrs.frozen
class QuantizeParams:
    mode: str


def _infer_quantize(params: QuantizeParams, specs):
    (x,) = specs
    bits, vpw, _ = quant_format(params.mode)
    if len(x.shape) != 3:
        raise ShapeError(f"kv_quantize: x must be [n, kv_heads, head_dim], got {x.shape}")
    n, heads, dim = x.shape
    if dim % vpw:
        raise ShapeError(f"kv_quantize: head_dim {dim} must be a multiple of {vpw} for {params.mode}")
    select_variant("kv_quantize", mode=params.mode, src_dtype=x.dtype)
    return (TensorSpec((n, heads, dim // vpw), "u32"), TensorSpec((n, heads), "f16"))


def _encode_quantize(ctx, params: QuantizeParams, inputs, outputs):
    (x,), (packed, scales) = inputs, outputs
    wp = WriteParams("contiguous", 0, mode=params.mode)
    return [_write_dispatch(ctx, wp, x, packed, scales, None, None)]


KV_QUANTIZE = register(OpDef("kv_quantize", _infer_quantize, _encode_quantize, inputs=("x",)))


def kv_quantize(x: TensorT, mode: str = "int8", *, out: tuple[TensorT, TensorT] | None = None) -> QuantizedKV:
    """Quantize rows per (row, head) with a symmetric f16 scale -> QuantizedKV (packed u32 [n, Hkv, D / vpw],
    scales f16 [n, Hkv], mode, D).

    x: rows [n, Hkv, D], f32 or f16.
    mode: "int8" (4 values per u32) or "int4" (8 per u32).
    out: (packed, scales) tensors to write into instead of new ones."""
    packed, scales = apply(KV_QUANTIZE, QuantizeParams(args.choice("kv_quantize", "mode", mode, tuple(QUANT_MODES))),
                           (x,), out=out)
    return QuantizedKV(packed, scales, mode, x.shape[2])


@attrs.frozen
class DequantizeParams:
    mode: str
    dtype: str


def _infer_dequantize(params: DequantizeParams, specs):
    packed, scales = specs
    bits, vpw, _ = quant_format(params.mode)
    args.dtype_name("kv_dequantize", "dtype", params.dtype, ("f16", "f32"))
    if len(packed.shape) != 3:
        raise ShapeError(f"kv_dequantize: packed must be u32 [n, kv_heads, head_dim / {vpw}], got {packed.shape}")
    n, heads, words = packed.shape
    _check_packed(params.mode, packed, scales, (n, heads, words * vpw), "kv_dequantize")
    select_variant("kv_dequantize", mode=params.mode, output_dtype=params.dtype)
    return (TensorSpec((n, heads, words * vpw), params.dtype),)


def _encode_dequantize(ctx, params: DequantizeParams, inputs, outputs):
    (packed, scales), (x,) = inputs, outputs
    variant = select_variant("kv_dequantize", mode=params.mode, output_dtype=params.dtype)
    n, heads, dim = x.shape
    return [ctx.dispatch(variant, uniforms={"n_rows": n, "kv_heads": heads, "head_dim": dim},
                         bindings={"packed": packed, "scales": scales, "dst": x},
                         workgroups=ctx.grid(ceil_div(x.size, kernel(variant).threads)), label="kv_dequantize")]


KV_DEQUANTIZE = register(OpDef("kv_dequantize", _infer_dequantize, _encode_dequantize,
                               inputs=("qkv.packed", "qkv.scales")))


def kv_dequantize(qkv: QuantizedKV, *old_args: Any, dtype: DTypeLike = "f32", out: TensorT | None = None) -> Any:
    """Inverse of kv_quantize: q * scale as `dtype` [n, Hkv, D] (a Tensor, or a Value in a graph).

    qkv: the QuantizedKV kv_quantize returns (for packed data from elsewhere, build one: QuantizedKV(packed,
        scales, mode, head_dim) checks the shapes).
    old_args: refused: the old (packed, scales, mode) call; the mode is part of the QuantizedKV.
    dtype: the output's, "f32" or "f16" (or numpy's / torch's spelling of one).
    out: a tensor of the output's shape and dtype to write into."""
    if old_args or not isinstance(qkv, QuantizedKV):  # the old (packed, scales, mode) call, or anything else
        given = type(qkv).__name__ + (f" and {len(old_args)} more positional argument(s)" if old_args else "")
        raise ShapeError(f"kv_dequantize: qkv must be a QuantizedKV (packed, scales, mode, head_dim), alone, got "
                         f"{given}; the mode is part of the data, so it cannot be guessed")
    dtype = args.dtype_name("kv_dequantize", "dtype", dtype, ("f16", "f32"))
    return apply(KV_DEQUANTIZE, DequantizeParams(qkv.mode, dtype), (qkv.packed, qkv.scales), out=out)
