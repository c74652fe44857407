// Shared by the batched attention kernels (wgraph/ops/attention_batched.py: attention_varlen and
// attention_kvcache): the uniform struct and where sequence b's queries and keys are. Every length read from
// a GPU buffer is clamped so no read leaves the q/k/v buffers, whatever the buffer holds, and reported on the
// device error flag (device_errors.wgsl).
// Semantics: docs/attention.md (FlashAttention 2's varlen and kvcache calls).
// The mask consts, the NaN test, the score transform and the row lse are attention_params.wgsl's, included
// from the same files (attention_nan.wgsl, attention_score.wgsl).
struct BatchParams {
    batch: u32,              // B sequences
    num_heads: u32,          // Hq
    num_kv_heads: u32,       // Hkv; Hq % Hkv == 0
    head_dim: u32,           // D
    q_rows: u32,             // rows of q (total_q); lse is [Hq, q_rows]
    q_packed: u32,           // 1: sequence b's queries are rows cu_q[b] .. cu_q[b+1]; 0: rows b * max_q .. + max_q
    max_q: u32,              // packed: max_seqlen_q; else the queries per sequence
    kv_rows: u32,            // rows of the k/v buffers
    max_k: u32,              // packed: max_seqlen_k; cache: capacity of one sequence (paged: max_pages * page_size)
    seqlen_add: u32,         // cache: sequence b has kv_lens[b] + seqlen_add keys (rows written by this call)
    page_size: u32,
    max_pages: u32,          // block_table row length
    num_pages: u32,          // pages in the pool (kv_rows / page_size)
    scale: f32,
    softcap: f32,            // s = softcap * tanh(s / softcap) where SOFTCAP (attention_score.wgsl)
    causal: u32,
    window_left: i32,        // -1: unbounded; else key masked when key_pos < query_pos - window_left
    window_right: i32,       // -1: unbounded; else key masked when key_pos > query_pos + window_right
    write_lse: u32,          // 1: write the log-sum-exp of each (head, query) row to lse
    num_chunks: u32,         // split-K decode: the most chunks of one (sequence, head)
}

@group(0) @binding(0) var<uniform> params: BatchParams;
@group(0) @binding(4) var<storage, read> cu_q: array<u32>;          // packed queries: [B + 1] offsets
@group(0) @binding(5) var<storage, read> kv_lens: array<u32>;       // packed: cu_k [B + 1]; cache: cache_seqlens [B]
@group(0) @binding(6) var<storage, read> block_table: array<u32>;   // paged: [B, max_pages] page ids
//!include device_errors.wgsl

//!include attention_nan.wgsl

// (first row, length) of the packed sequence between offsets s0 and e0 of a buffer of `rows` rows, at most
// max_len long. A bad offset (past the rows, decreasing, a length above max_len) is reported and clamped, so
// the sequence never reaches outside the rows.
fn packed_seq(s0: u32, e0: u32, rows: u32, max_len: u32) -> vec2<u32> {
    if (max(s0, e0) > rows) {
        report_error(ERR_VARLEN_OFFSET, max(s0, e0), rows);
    }
    let s = min(s0, rows);
    let e = min(e0, rows);
    if (e < s) {
        report_error(ERR_VARLEN_DECREASING, e0, s0);
        return vec2<u32>(s, 0u);
    }
    if (e - s > max_len) {
        report_error(ERR_VARLEN_LENGTH, e - s, max_len);
    }
    return vec2<u32>(s, min(e - s, max_len));
}

// (first q row, queries) of sequence b.
// Where sequence b's keys are, compiled in (docs/kernels.md: each key step of a loop finds its row): KV_PACKED,
// rows cu_k[b] .. cu_k[b+1] (varlen); KV_PAGED, pages through block_table; neither, a cache [B, max_k].
override KV_PACKED: bool;
override KV_PAGED: bool;

fn seq_q(b: u32) -> vec2<u32> {
    if (params.q_packed == 0u) {
        return vec2<u32>(b * params.max_q, params.max_q);
    }
    let s = packed_seq(cu_q[b], cu_q[b + 1u], params.q_rows, params.max_q);
    packed_ends(b, cu_q[b], cu_q[b + 1u], params.q_rows);
    return s;
}

// The offsets of a packed buffer of `rows` rows run from 0 to rows: rows outside every sequence would be left
// unwritten (q) or unread (k/v). The first and the last sequence's workgroups report it, where the sequence's
// own offsets s0 <= e0 <= rows (else packed_seq reported those).
fn packed_ends(b: u32, s0: u32, e0: u32, rows: u32) {
    if (s0 > e0 || e0 > rows) {
        return;
    }
    if (b == 0u && s0 != 0u) {
        report_error(ERR_VARLEN_FIRST, s0, 0u);
    }
    if (b + 1u == params.batch && e0 != rows) {
        report_error(ERR_VARLEN_LAST, e0, rows);
    }
}

// (first k/v row when packed, keys) of sequence b.
fn seq_k(b: u32) -> vec2<u32> {
    if (KV_PACKED) {
        let s = packed_seq(kv_lens[b], kv_lens[b + 1u], params.kv_rows, params.max_k);
        packed_ends(b, kv_lens[b], kv_lens[b + 1u], params.kv_rows);
        return s;
    }
    let have = kv_lens[b];
    if (have > params.max_k - params.seqlen_add) {   // host checks seqlen_add <= max_k: no wrap here
        report_error(ERR_KVCACHE_LEN, select(have + params.seqlen_add, 0xffffffffu,
                                             have > 0xffffffffu - params.seqlen_add), params.max_k);
        return vec2<u32>(0u, params.max_k);        // only the rows the cache holds
    }
    return vec2<u32>(0u, have + params.seqlen_add);
}

// The sequence an invocation serves and its first packed k/v row, set by main (enter_seq) before any kv_row:
// kv_row(j) then takes one argument, as in the single-sequence kernels, whose tile loops the batched kernels
// include (docs/kernels.md, "Shared kernel bodies").
var<private> seq_b: u32;
var<private> seq_k0: u32;

fn enter_seq(b: u32, k0: u32) {
    seq_b = b;
    seq_k0 = k0;
}

// Row of the k/v buffers holding key j (< seq_k(seq_b).y) of the sequence enter_seq named.
fn kv_row(j: u32) -> u32 {
    let b = seq_b;
    if (KV_PACKED) {
        return seq_k0 + j;
    }
    if (!KV_PAGED) {
        return b * params.max_k + j;
    }
    var page = block_table[b * params.max_pages + j / params.page_size];
    if (page >= params.num_pages) {
        report_error(ERR_KVCACHE_PAGE, page, params.num_pages);
        page = params.num_pages - 1u;
    }
    return page * params.page_size + j % params.page_size;
}

// Index of head dim d of kv head g in k/v row `row` ([rows, Hkv, D], as attention_params.wgsl's).
fn kv_index(row: u32, g: u32, d: u32) -> u32 {
    return (row * params.num_kv_heads + g) * params.head_dim + d;
}

// a - b, or 0 when b > a (u32: no wrap)
fn sat_sub(a: u32, b: u32) -> u32 {
    return select(0u, a - b, a > b);
}

// The keys [lo, hi) query i of a sequence with sq queries and sk keys sees: bottom-right aligned (query i at
// position i + sk - sq, key j at j), causal, window (left, right). Every mask is an interval. Computed in u32
// from `back` = sq - 1 - i, the queries after i (query i sits `back` positions before key sk - 1), so no sum
// wraps: any sk, and window sides up to 2^31 - 1 (i32 sums of positions and sides did wrap: issue 26).
fn visible(i: u32, sq: u32, sk: u32) -> vec2<u32> {
    let back = sq - 1u - i;                  // i < sq
    var hi = sk;
    if (params.causal != 0u) {
        hi = sat_sub(hi, back);              // keys j <= qpos = sk - 1 - back
    }
    if (params.window_right >= 0) {
        let right = u32(params.window_right);
        if (right < back) {
            hi = min(hi, sat_sub(sk, back - right));   // keys j <= qpos + right
        }
    }
    var lo = 0u;
    if (params.window_left >= 0) {
        lo = sat_sub(sat_sub(sk, back + 1u), u32(params.window_left));   // keys j >= qpos - left
    }
    return vec2<u32>(lo, max(hi, lo));
}

//!include attention_score.wgsl
