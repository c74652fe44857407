// Shared by every attention kernel: the uniform struct (the one source of its layout) and the math that
// depends only on it. See docs/attention.md ("The rules").
struct AttnParams {
    seq_len: u32,             // S, queries
    num_heads: u32,           // Hq
    num_kv_heads: u32,        // Hkv; Hq % Hkv == 0
    head_dim: u32,            // D
    kv_len: u32,              // keys, when kv_len_from_buffer == 0
    kv_len_from_buffer: u32,  // 1: keys = min(kv_len_buf[0], kv_len_cap)
    kv_len_cap: u32,          // keys the k/v storage can address (bounds a kv_len read from the GPU)
    start_pos: u32,           // absolute position of query 0, when start_pos_from_end == 0
    start_pos_from_end: u32,  // 1: query 0 sits at kv_start + kv_len - S (bottom-right aligned)
    kv_start: u32,            // absolute position of key 0
    scale: f32,
    softcap: f32,             // s = softcap * tanh(s / softcap) where SOFTCAP (attention_score.wgsl)
    causal: u32,
    sliding_window: u32,      // 0: off; else key masked when key_pos <= query_pos - sliding_window
    page_size: u32,
    kv_rows: u32,             // rows the k/v buffers hold
    num_chunks: u32,          // chunked decode only: kv chunks per head
    chunk_size: u32,          // chunked decode only: keys per chunk
    window_right: i32,        // -1: off; else key masked when key_pos > query_pos + window_right
    write_lse: u32,           // 1: the kernel that writes out also writes lse [Hq, S] (log-sum-exp per row)
}

@group(0) @binding(0) var<uniform> params: AttnParams;

// How the k/v rows hold key positions, compiled in (docs/kernels.md: each key step of a loop finds its row):
// neither, contiguous (key j at row j); KV_RING, a ring of kv_rows rows; KV_PAGED, pages through page_table.
override KV_RING: bool;
override KV_PAGED: bool;

//!include attention_nan.wgsl

// Position of query i relative to key 0 (query position - kv_start) as vec2(behind, distance): behind is 1 when
// the query sits before key 0. All u32 and wrap-free for every accepted value (kv_start, kv_len, start_pos and
// sliding_window any u32; the host keeps start_pos + S - 1 within u32), which i32 positions were not.
fn query_pos(i: u32, kv_len: u32) -> vec2<u32> {
    if (params.start_pos_from_end != 0u) {
        let back = params.seq_len - i;  // >= 1: query i sits at kv_len - back
        if (kv_len >= back) {
            return vec2<u32>(0u, kv_len - back);
        }
        return vec2<u32>(1u, back - kv_len);
    }
    let p = params.start_pos + i;
    if (p >= params.kv_start) {
        return vec2<u32>(0u, p - params.kv_start);
    }
    return vec2<u32>(1u, params.kv_start - p);
}

// The keys a query at relative position rel (query_pos) sees: [x, y) in key indices. Every mask (causal,
// window, ring eviction) is an interval, so kernels loop over this range and never test a per-key mask.
// Empty when x == y.
fn key_range(rel: vec2<u32>, kv_len: u32) -> vec2<u32> {
    let ahead = rel.x == 0u;
    var lo = 0u;
    var hi = kv_len;
    if (params.causal != 0u) {
        if (!ahead) {
            hi = 0u;
        } else if (rel.y < kv_len) {
            hi = rel.y + 1u;
        }
    }
    if (params.sliding_window != 0u && ahead && rel.y >= params.sliding_window) {
        lo = rel.y - params.sliding_window + 1u;
    }
    if (params.window_right >= 0) {
        // keys up to query + window_right: hi = rel + right + 1 where that is below kv_len, without a u32 wrap
        let r = u32(params.window_right);
        if (!ahead) {
            hi = select(0u, min(hi, r - rel.y + 1u), r >= rel.y);
        } else if (r < kv_len && rel.y < kv_len - r - 1u) {
            hi = min(hi, rel.y + r + 1u);
        }
    }
    if (KV_RING && kv_len > params.kv_rows) {
        // Ring: only the last kv_rows keys are still stored; older ones count as masked.
        lo = max(lo, kv_len - params.kv_rows);
    }
    hi = max(hi, lo);
    return vec2<u32>(lo, hi);
}

//!include attention_score.wgsl

fn kv_head_of(h: u32) -> u32 {
    return h / (params.num_heads / params.num_kv_heads);
}

fn q_index(i: u32, h: u32, d: u32) -> u32 {
    return (i * params.num_heads + h) * params.head_dim + d;
}

fn kv_index(row: u32, g: u32, d: u32) -> u32 {
    return (row * params.num_kv_heads + g) * params.head_dim + d;
}
