"""TieredKVCache: an f16 hot ring of the newest `hot_window` rows plus a cold part (contiguous or paged; f16, int8
or int4) of the older ones; appending moves rows that leave the ring into the cold part, on the GPU."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from wgraph import args
from wgraph.errors import ArgumentError, DtypeError, LimitError, ShapeError
from wgraph.ops.core import tensor_arg
from wgraph.ops.kv_cache import kv_write, quant_format
from wgraph.ops.tiered import tiered_attention, tiered_quant_attention
from wgraph.tensor import Tensor, TensorSpec

if TYPE_CHECKING:
    from wgraph.api_types import Ids
    from wgraph.device import Device


# what TieredKVCache.attention passes on to tiered_attention; the cache gives the rest
ATTENTION_OPTIONS = ("sliding_window", "softcap", "scale", "window", "return_lse", "out")


class TieredKVCache:
    """Hot ring [hot_window, Hkv, D] f16 and cold part of `cold_capacity` positions.

    `append(k, v)` with an int position (the host tracks `length`) checks capacity and handles any number of
    rows; `append(k, v, kv_len=t)` with a u32 GPU tensor t holding the length *after* the append takes one row
    and records once for every position (decode). `attention(q, kv_len=...)` attends over all rows.

    device: the Device the tensors live on.
    kv_heads, head_dim: each row's shape [kv_heads, head_dim].
    hot_window: the ring's rows (the newest keys, f16).
    cold_capacity: how many older positions the cold part holds.
    quant: None (an f16 cold part), "int8" or "int4" (quantized as kv_quantize does; head_dim a multiple of the
        values per u32 word).
    page_size: rows per page of a paged cold part (cold_capacity a multiple of it); 0: contiguous.
    page_table: with page_size, the pages' order (ids 0 .. pages - 1, each once); None: pages in order.
    """

    def __init__(self, device: Device, *, kv_heads: int, head_dim: int, hot_window: int, cold_capacity: int,
                 quant: str | None = None, page_size: int = 0, page_table: Ids | None = None) -> None:
        fn = "TieredKVCache"
        from wgraph.device import Device  # the device module imports the ops

        if not isinstance(device, Device):
            raise args.fail(fn, "device", device, "a wgraph Device")
        kv_heads = args.integer(fn, "kv_heads", kv_heads, 1)
        head_dim = args.integer(fn, "head_dim", head_dim, 1)
        hot_window = args.integer(fn, "hot_window", hot_window, 1)
        cold_capacity = args.integer(fn, "cold_capacity", cold_capacity)
        quant = args.choice(fn, "quant", quant, (None, "int8", "int4"))
        page_size = args.integer(fn, "page_size", page_size)
        rows = max(1, cold_capacity)
        limit = device.caps.max_storage_binding_size
        for what, n in (("hot_window", hot_window), ("cold_capacity", rows)):
            if n * kv_heads * head_dim * 2 > limit:   # checked before a host array of that size is made
                raise LimitError(f"{fn}: {what}={n} x kv_heads={kv_heads} x head_dim={head_dim} f16 is "
                                 f"{n * kv_heads * head_dim * 2} bytes; the device binds at most {limit}")
        self.device, self.kv_heads, self.head_dim = device, kv_heads, head_dim
        self.hot_window, self.quant, self.page_size = hot_window, quant, page_size
        self.length = 0
        self.hot_k = device.tensor(np.zeros((hot_window, kv_heads, head_dim), np.float16), label="tiered.hot_k")
        self.hot_v = device.tensor(np.zeros((hot_window, kv_heads, head_dim), np.float16), label="tiered.hot_v")
        self.page_table = None
        if page_table is not None and not page_size:
            raise args.fail(fn, "page_table", page_table, "None without a page_size (a contiguous cold part)")
        if page_size:
            if cold_capacity % page_size or not cold_capacity:   # 0 is a multiple, but a page table holds pages
                raise ShapeError(f"{fn}: cold_capacity {cold_capacity} must be a positive multiple of page_size "
                                 f"{page_size} (a paged cold part holds whole pages, at least one)")
            pages = rows // page_size
            table = np.arange(pages) if page_table is None else args.ids(fn, "page_table", page_table, 0, pages - 1)
            if table.shape != (pages,):
                raise ShapeError(f"{fn}: page_table must hold {rows // page_size} page ids in 0..{rows // page_size - 1}")
            ids, counts = np.unique(table, return_counts=True)
            if (counts > 1).any():   # two logical pages on one physical page: their rows overwrite each other
                raise ShapeError(f"{fn}: page_table {table.tolist()} repeats page id {int(ids[counts > 1][0])}; the "
                                 f"cold part owns its {pages} pages, so the ids must be 0..{pages - 1} each once")
            self.page_table = device.tensor(table.astype(np.uint32), label="tiered.page_table")
        self.cold_capacity = cold_capacity
        if quant is None:
            shape, dtype = (rows, kv_heads, head_dim), np.float16
            self.cold_k = device.tensor(np.zeros(shape, dtype), label="tiered.cold_k")
            self.cold_v = device.tensor(np.zeros(shape, dtype), label="tiered.cold_v")
            self.cold_k_scale = self.cold_v_scale = None
        else:
            _, vpw, _ = quant_format(quant)
            if head_dim % vpw:
                raise ShapeError(f"{fn}: head_dim {head_dim} must be a multiple of {vpw} for {quant}")
            packed = np.zeros((rows, kv_heads, head_dim // vpw), np.uint32)
            self.cold_k = device.tensor(packed, label="tiered.cold_k")
            self.cold_v = device.tensor(packed, label="tiered.cold_v")
            self.cold_k_scale = device.tensor(np.zeros((rows, kv_heads), np.float16), label="tiered.cold_k_scale")
            self.cold_v_scale = device.tensor(np.zeros((rows, kv_heads), np.float16), label="tiered.cold_v_scale")

    @property
    def _cold(self) -> dict:
        return {"layout": "paged" if self.page_table is not None else "contiguous", "page_table": self.page_table,
                "page_size": self.page_size, "mode": self.quant}

    def _to_cold(self, src, dst, scales, pos, **kw):
        kv_write(src, dst, pos, scales=scales, **self._cold, **kw)

    def append(self, k_new: Tensor, v_new: Tensor, *, kv_len: Tensor | None = None) -> None:
        """Append rows at position `length` (or, with kv_len, at kv_len[0] - 1 on the GPU); rows leaving the ring
        move to the cold part.

        k_new, v_new: the new keys and values [n, Hkv, D] f16.
        kv_len: None (the host tracks the length: any n, capacity checked) or a u32 tensor holding the length
            after the append (one row; the GPU reads it, so a recording replays for every position)."""
        for name, x in (("k_new", k_new), ("v_new", v_new)):
            tensor_arg("TieredKVCache.append", name, x)
        if kv_len is not None:
            tensor_arg("TieredKVCache.append", "kv_len", kv_len)
            TensorSpec(kv_len.shape, kv_len.dtype).check_u32_scalar(
                f"TieredKVCache.append: kv_len must be a u32 tensor with one value (the length after the append), "
                f"got {kv_len.shape} {kv_len.dtype}")
        if k_new.shape != v_new.shape or k_new.shape[1:] != (self.kv_heads, self.head_dim):
            raise ShapeError(f"TieredKVCache.append: new rows {k_new.shape}/{v_new.shape} must be [n, {self.kv_heads}, {self.head_dim}]")
        if k_new.dtype != "f16" or v_new.dtype != "f16":   # checked before the first of the moves below runs
            raise DtypeError(f"TieredKVCache.append: new rows must be f16 (the hot ring's dtype), got "
                             f"{k_new.dtype}/{v_new.dtype}")
        W = self.hot_window
        pairs = ((k_new, self.hot_k, self.cold_k, self.cold_k_scale), (v_new, self.hot_v, self.cold_v, self.cold_v_scale))
        if kv_len is not None:
            if k_new.shape[0] != 1:
                raise ShapeError(f"TieredKVCache.append: a GPU kv_len takes one row (decode), got {k_new.shape[0]}")
            for new, hot, cold, scales in pairs:
                # The row at position kv_len-1-W leaves the ring (skipped on the GPU while that is negative).
                self._to_cold(hot, cold, scales, kv_len, pos_offset=-1 - W, n_rows=1, src_ring=W)
                kv_write(new, hot, kv_len, layout="ring", pos_offset=-1)
            self.length = None  # known on the GPU only from here on (set once the writes were taken)
            return
        if self.length is None:
            raise ShapeError("TieredKVCache.append: this cache was appended with a GPU kv_len; keep passing kv_len=")
        p, n = self.length, k_new.shape[0]
        cold_after = max(0, p + n - W)
        if cold_after > self.cold_capacity:
            raise LimitError(f"TieredKVCache.append: the cache is full: {p + n} rows need {cold_after} cold rows beyond the hot window "
                             f"of {W}; the cold part holds {self.cold_capacity}")
        move_start, move_stop = max(0, p - W), min(p, cold_after)
        direct = max(0, n - W)
        for new, hot, cold, scales in pairs:
            if move_stop > move_start:
                self._to_cold(hot, cold, scales, move_start, n_rows=move_stop - move_start, src_ring=W)
            if direct:
                self._to_cold(new, cold, scales, p, n_rows=direct)
            kv_write(new, hot, p + direct, layout="ring", n_rows=n - direct, src_row0=direct)
        self.length = p + n

    def attention(self, q: Tensor, *, causal: bool, kv_len: int | Tensor | None = None, **options: Any) -> Any:
        """Tiered attention of q over every row of the cache (tiered_attention, or tiered_quant_attention for a
        quantized cold part).

        q: queries [S, Hq, D].
        causal: required, True or False (as tiered_attention's).
        kv_len: None: the host-tracked length; else an int or a u32 tensor (required once appends used a GPU
            kv_len). With a host-tracked length an int must be that length (or below it while every row is hot).
        options: tiered_attention's other keywords (sliding_window, softcap, scale, window, return_lse, out)."""
        for name, value in options.items():
            if name not in ATTENTION_OPTIONS:  # else a raw TypeError: "dict() got multiple values for 'hot_window'"
                raise ArgumentError(f"TieredKVCache.attention: {name}={args.show(value)} is not an option (the cache "
                                    f"sets hot_window, page_table, page_size and mode); the options are "
                                    f"{', '.join(ATTENTION_OPTIONS)}")
        if kv_len is None:
            if self.length is None:
                raise ShapeError("TieredKVCache.attention: this cache's length lives on the GPU; pass kv_len=")
            kv_len = self.length
        elif (self.length is not None and args.is_int(kv_len) and 0 <= kv_len <= args.U32_MAX
              and kv_len != self.length):   # out of range: tiered_attention's ArgumentError
            # the layout holds exactly `length` rows: past it rows were never written, and below it (once rows left
            # the ring) the ring slots a prefix's newest rows map to hold later rows: attention over other keys
            if kv_len > self.length:
                raise LimitError(f"TieredKVCache.attention: kv_len {kv_len} is past the cache's {self.length} rows "
                                 f"(the rows after them were never written)")
            if self.length > self.hot_window:
                raise ShapeError(f"TieredKVCache.attention: kv_len {kv_len} is below the cache's {self.length} rows; "
                                 f"the ring holds the newest {self.hot_window}, so rows of a shorter prefix were "
                                 f"overwritten: pass kv_len={self.length} (or None)")
        common = dict(kv_len=kv_len, causal=causal, hot_window=self.hot_window, page_table=self.page_table,
                      page_size=self.page_size, **options)
        if self.quant is None:
            return tiered_attention(q, self.hot_k, self.hot_v, self.cold_k, self.cold_v, **common)
        return tiered_quant_attention(q, self.hot_k, self.hot_v, self.cold_k, self.cold_v, self.cold_k_scale,
                                      self.cold_v_scale, mode=self.quant, **common)
