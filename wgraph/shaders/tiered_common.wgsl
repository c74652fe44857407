// The uniform struct, positions, ranges and row addressing shared by tiered_attention.wgsl and tiered_quant.wgsl
// (included).
// Key j (0 <= j < n) sits at position j. The newest hot_len = min(n, hot_window) keys live in the hot ring at
// slot j % hot_window; the older cold_len = n - hot_len keys live in the cold part at row j (contiguous) or
// page_table[j / cold_page_size] * cold_page_size + j % cold_page_size (paged). Queries are the last seq_len
// positions: query i sits at n - seq_len + i.

// The uniform layout of both kernels: wgraph/ops/tiered.py fills it from one dict for either op.
struct TieredParams {
    num_heads: u32,
    num_kv_heads: u32,
    head_dim: u32,
    seq_len: u32,
    kv_len: u32,
    use_len_buf: u32,
    len_cap: u32,          // keys the storage holds: a GPU kv_len above it is clamped and reported
    hot_window: u32,
    cold_layout: u32,
    cold_page_size: u32,
    cold_pages: u32,       // physical pages of the cold pool (paged): ids at or past it are reported
    causal: u32,
    sliding_window: u32,
    scale: f32,
    softcap: f32,
    window_right: i32,   // -1: off; else key masked when key_pos > query_pos + window_right
    write_lse: u32,      // 1: write lse [Hq, S] (tiered_loop.wgsl)
}

@group(0) @binding(0) var<uniform> params: TieredParams;
const LEN_ERROR_SITE: u32 = ERR_TIERED_KV_LEN;

var<private> cold_len: u32;

fn prepare(n: u32) {
    // The queries are the last n positions: a GPU n below them (the host refuses an int one) is reported.
    if (params.use_len_buf != 0u && n < params.seq_len) {
        report_error(ERR_TIERED_QUERIES, n, params.seq_len);
    }
    cold_len = n - min(n, params.hot_window);
}

fn query_pos(i: u32, n: u32) -> i32 {
    return i32(n) - i32(params.seq_len) + i32(i);
}

// Keys [lo, hi) visible to a query at qpos under causal / sliding-window masking.
fn key_range(qpos: i32, n: u32) -> vec2<u32> {
    var hi = i32(n);
    if (params.causal != 0u) {
        hi = min(hi, qpos + 1);
    }
    if (params.window_right >= 0 && qpos < hi - params.window_right - 1) {
        hi = qpos + params.window_right + 1;   // qpos + right + 1 < hi: no i32 overflow
    }
    var lo = 0;
    // Compared as u32 first: i32(sliding_window) of a window >= 2^31 would be negative and mask every key.
    if (params.sliding_window > 0u && qpos >= 0 && u32(qpos) >= params.sliding_window) {
        lo = qpos - i32(params.sliding_window) + 1;
    }
    hi = max(hi, 0);
    lo = min(lo, hi);
    return vec2<u32>(u32(lo), u32(hi));
}

fn key_masked(j: u32, qpos: i32) -> bool {
    return false;
}

// Row of the cold part that holds key j; a page id past the cold pool (cold_pages, from the host's shape: an f16
// pool's arrayLength counts the binding's padding to 4 bytes, a row of one f16 value) is clamped to the last page
// and reported.
fn cold_row(j: u32) -> u32 {
    if (params.cold_layout == 1u) {
        let ps = params.cold_page_size;
        var page = page_table[j / ps];
        let pages = params.cold_pages;
        if (page >= pages) {
            report_error(ERR_TIERED_PAGE, page, pages);
            page = pages - 1u;
        }
        return page * ps + j % ps;
    }
    return j;
}

fn hot_index(j: u32, kvh: u32, d: u32) -> u32 {
    return ((j % params.hot_window) * params.num_kv_heads + kvh) * params.head_dim + d;
}

// Dot of q_sh with hot key j, and component d of hot value j (both kernels' hot ring: hot_k, hot_v).
fn hot_dot(j: u32, kvh: u32) -> f32 {
    let base = hot_index(j, kvh, 0u);
    var s = 0.0;
    for (var d = 0u; d < params.head_dim; d = d + 1u) {
        s = s + q_sh[d] * f32(hot_k[base + d]);
    }
    return s;
}

fn hot_value(j: u32, kvh: u32, d: u32) -> f32 {
    return f32(hot_v[hot_index(j, kvh, d)]);
}
