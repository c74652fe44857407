"""The device error flag: what kernels report when a value they read from a GPU buffer (a kv_len, a position)
is out of range. They stay in bounds (clamp or skip) and record the first such error in a 16-byte u32 buffer
per device (shaders/device_errors.wgsl); `dev.check_errors()` and every readback raise it as GpuValueError."""

from __future__ import annotations

import struct

import attrs

from wgraph.errors import GpuValueError, RegistryError
from wgraph.kernels import wgsl
from wgraph.kernels.registry import SHADER_DIR

BINDING = "device_errors"  # the binding's name in device_errors.wgsl; ctx.dispatch fills it
FLAG_WORDS = 4  # site, value, limit, unused: the WGSL array<atomic<u32>, 4>
FLAG_BYTES = 4 * FLAG_WORDS


@attrs.frozen
class Site:
    """Who reports an error, what its value is, and how it must compare with the limit."""

    op: str
    value: str
    relation: str  # "<" or "<="
    limit: str
    outcome: str  # what the kernel did instead


_ROW_POS = ("the position of a row (GPU position + pos_offset + row index; 4294967295 when that is negative or "
            "passes 2^32 - 1)")

# Site code names (consts of device_errors.wgsl, whose values are the codes) -> what the host says.
SITES = {
    "ERR_ATTENTION_KV_LEN": Site("attention", "the GPU kv_len (of attention_kvcache with one sequence: its "
                                 "cache_seqlens)", "<=", "the keys the k/v storage holds, at most 2^31 (a ring's too)",
                                 "clamped to the limit"),
    "ERR_ATTENTION_RING": Site("attention", "the GPU kv_len of a ring (kv_layout='ring')", "<=",
                               "the largest kv_len whose keys the queries see the ring still holds (its rows; more "
                               "where the window keeps every query within them; an int kv_len past it is a "
                               "LimitError)",
                               "the keys older than the ring counted as masked"),
    "ERR_ROPE_POS": Site("rope", _ROW_POS, "<", "the table's rows",
                         "the row written as zeros"),
    "ERR_KV_APPEND_POS": Site("kv_append", _ROW_POS, "<", "the cache capacity, or 2^31 for a ring",
                              "the row not written"),
    "ERR_KV_QUANTIZE_POS": Site("kv_append_quantized", _ROW_POS, "<", "the cache capacity, or 2^31 for a ring",
                                "the row not written"),
    "ERR_TIERED_KV_LEN": Site("tiered_attention", "the GPU kv_len", "<=",
                              "the keys the hot ring and the cold part hold (hot_window + cold capacity, at most "
                              "2^31 - 1)",
                              "clamped to the limit"),
    "ERR_BDPA_KV_LEN": Site("bdpa_attention", "the GPU kv_len", "<=", "the index's rows", "clamped to the limit"),
    "ERR_EMBEDDING_ID": Site("embedding", "a token id read from the GPU", "<", "the table's rows",
                             "its row written as zeros"),
    "ERR_SAMPLE_EMPTY": Site("sample", "the count of tokens a row could draw (logits with a weight above 0; none in "
                             "a row holding a NaN or +inf)", ">=",
                             "one token", "the id written as 4294967295"),
    "ERR_VARLEN_OFFSET": Site("attention_varlen", "a GPU cu_seqlens offset", "<=", "the rows of the packed q or k/v",
                              "clamped to the rows"),
    "ERR_VARLEN_DECREASING": Site("attention_varlen", "a GPU cu_seqlens offset", ">=", "the offset before it",
                                  "the sequence read as empty"),
    "ERR_VARLEN_LENGTH": Site("attention_varlen", "a sequence length from a GPU cu_seqlens", "<=",
                              "max_seqlen_q or max_seqlen_k", "the sequence cut to that length"),
    "ERR_KVCACHE_LEN": Site("attention_kvcache", "a GPU cache_seqlens[b] + the new rows (4294967295 when that passes "
                            "2^32 - 1)", "<=", "the capacity of one sequence (at most 2^31)",
                            "keys clamped to the capacity, new rows past it not written"),
    "ERR_KVCACHE_PAGE": Site("attention_kvcache", "a GPU block_table page id", "<", "the pages of the cache",
                             "keys read from the last page; a new row through it not written"),
    "ERR_ATTENTION_PAGE": Site("attention", "a GPU page_table page id (of attention_kvcache with one sequence: its "
                               "block_table's)", "<", "the pages the k/v rows hold", "clamped to the last page"),
    "ERR_KV_APPEND_PAGE": Site("kv_append", "a GPU page_table page id", "<", "the pages the cache holds",
                               "the row not written"),
    "ERR_KV_QUANTIZE_PAGE": Site("kv_append_quantized", "a GPU page_table page id", "<", "the pages the cache holds",
                                 "the row not written"),
    "ERR_VARLEN_FIRST": Site("attention_varlen", "the first offset of a GPU cu_seqlens", "==", "the start of the "
                             "packed rows", "the rows before it not written (q) or not read (k/v)"),
    "ERR_VARLEN_LAST": Site("attention_varlen", "the last offset of a GPU cu_seqlens", "==", "the packed rows of q or "
                            "k/v", "the rows after it not written (q) or not read (k/v)"),
    "ERR_KV_QUANTIZE_RANGE": Site("kv_append_quantized", "the largest |value| of a (row, kv head) quantized "
                                  "(4294967040 at and past it)", "<=", "the format's reach (its largest code x f16's "
                                  "largest scale 65504)", "the scale held at 65504: the values clipped"),
    "ERR_TIERED_PAGE": Site("tiered_attention", "a GPU page_table page id", "<", "the pages of the cold part",
                            "clamped to the last page"),
    "ERR_TIERED_QUERIES": Site("tiered_attention", "the GPU kv_len", ">=", "the queries (the last kv_len positions)",
                               "the queries before position 0 see no key when causal, every key when not"),
    "ERR_DECODE_POSITION": Site("decode_advance", "the GPU position pos (decode_advance_batched: a sequence's pos[b])",
                                "<=", "the largest position whose new position (pos + 1) and kv_len (pos + 2) fit "
                                "u32", "that sequence's token, history, pos and kv_len not written"),
    "ERR_BDPA_BASIS": Site("bdpa_attention", "a basis id read from the GPU index", "<", "the basis rows",
                           "its key skipped, as if masked"),
    "ERR_BDPA_RESIDUAL": Site("bdpa_attention", "a residual id read from the GPU index", "<", "the residual rows",
                              "its key skipped, as if masked"),
    "ERR_BDPA_POSITION": Site("bdpa_attention", "an original position read from the GPU index", "<",
                              "the RoPE table's rows", "its key skipped, as if masked"),
}


def _codes() -> dict[int, str]:
    consts = wgsl.parse_consts((SHADER_DIR / "device_errors.wgsl").read_text())
    codes = {value: name for name, value in consts.items() if name.startswith("ERR_")}
    if set(codes.values()) != set(SITES) or 0 in codes:
        raise RegistryError(f"device_errors.wgsl's site codes {sorted(codes.values())} and SITES {sorted(SITES)} "
                             f"differ (or one is 0, which means no error)")
    return codes


CODES = _codes()


def decode(raw: bytes) -> GpuValueError | None:
    """The error a flag's bytes hold, or None when they hold none."""
    code, value, limit, _ = struct.unpack(f"<{FLAG_WORDS}I", raw[:FLAG_BYTES])
    if code == 0:
        return None
    name = CODES.get(code)
    if name is None:
        return GpuValueError(f"the device error flag holds an unknown site code {code} (value {value}, limit {limit})")
    site = SITES[name]
    return GpuValueError(f"{site.op}: {site.value} was {value}; it must be {site.relation} {limit}, {site.limit} "
                         f"({site.outcome}; reported by a kernel on the GPU, only the first such error is kept)")
