// The keys of a single-sequence decode query (the split-K kernels, their combine and the one-pass kernel): the kv
// length (from the uniform or the GPU buffer), the kv layouts, and the visible range. Needs attention_params.wgsl.
@group(0) @binding(4) var<storage, read> kv_len_buf: array<u32>;
@group(0) @binding(5) var<storage, read> page_table: array<u32>;
//!include attention_kv_layout.wgsl

// The visible keys [lo, hi) of the decode query (seq_len 1).
fn splitk_range(kv_len: u32) -> vec2<u32> {
    return key_range(query_pos(0u, kv_len), kv_len);
}
