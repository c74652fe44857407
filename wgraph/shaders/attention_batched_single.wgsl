// Batched one-pass decode: attention_decode_single.wgsl over a ragged batch with one query per sequence.
// Workgroup (0, g * blocks + blk, b) walks every visible key of sequence b for q heads blk * G_TILE .. + ng of
// kv head g (the fused steps and merge, attention_fused_steps.wgsl and attention_fused_merge.wgsl) and writes
// out and lse as attention_batched_combine.wgsl writes them (no key: zeros and lse -inf). Positions and rows come
// from attention_batched_common.wgsl. One dispatch, B x Hq workgroups at G_TILE 1: planned for short spans only
// (registry max_kv_span, the capacity of one sequence).
{{ENABLE_F16}}
//!include attention_batched_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;   // 16-byte pieces: ELEMS dims each
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read_write> out: array<{{Q_T}}>;   // [q rows, Hq, D]
@group(0) @binding(8) var<storage, read_write> lse: array<f32>;       // [Hq, q rows]

const G_TILE: u32 = {{G_TILE}}u;   // q heads of one kv head a workgroup serves at once
//!include attention_fused_consts.wgsl

var<private> out_row: u32;         // the sequence's query row

fn out_at(h: u32, d: u32) -> u32 {
    return (out_row * params.num_heads + h) * params.head_dim + d;
}

fn lse_at(h: u32) -> u32 {
    return h * params.q_rows + out_row;
}

//!include attention_single_store.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_lane: u32) {
//!include attention_batched_head.wgsl
    let lo = range.x;
    let n = range.y - range.x;
    let qrow = sq.x + sq.y - 1u;
    out_row = qrow;
    out_head = h0;
    if (n == 0u) {
        store_no_keys(sg * sg_size + sg_lane, ng);   // the whole workgroup (n is uniform)
        return;
    }

//!include attention_fused_lanes.wgsl
    let q0 = (qrow * params.num_heads + h0) * D;
//!include attention_fused_q.wgsl

//!include attention_fused_steps.wgsl
//!include attention_fused_merge.wgsl
}
