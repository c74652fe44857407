// Shared by the attention kernels that read q/k/v: their bindings, the kv length and the kv layouts.
// Needs attention_params.wgsl first, and the defines Q_T, KV_T, KV_SCALAR (K/V reads: kv_k1, kv_v1).
@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
//!include {{KV_SCALAR}}
@group(0) @binding(4) var<storage, read> kv_len_buf: array<u32>;
@group(0) @binding(5) var<storage, read> page_table: array<u32>;

//!include attention_kv_layout.wgsl

// Scaled, soft-capped score of query i (head h) against key j, from global memory.
fn score_global(i: u32, h: u32, j: u32) -> f32 {
    let g = kv_head_of(h);
    let qb = q_index(i, h, 0u);
    let kb = kv_index(kv_row(j), g, 0u);
    var acc: f32 = 0.0;
    for (var d: u32 = 0u; d < params.head_dim; d++) {
        acc += f32(q[qb + d]) * kv_k1(kb + d);
    }
    return transform_score(acc);
}
