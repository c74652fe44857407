// Batched GEMM-shaped flash attention: attention_prefill_gemm.wgsl's kernel over a ragged batch (attention_varlen,
// attention_kvcache with several queries per sequence). Workgroup (h, b, z) takes q head h of sequence b, query
// block nblocks - 1 - z: the block index is the slowest of the grid, so the blocks with the most keys of every
// sequence start first and the short ones fill the tail; a block past the sequence's queries returns at once.
// Positions, masks and rows come from attention_batched_common.wgsl; the body is the single-sequence kernel's
// (attention_gemm_tiles.wgsl, attention_gemm_body.wgsl).
{{ENABLE_F16}}
//!include attention_batched_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<vec4<{{Q_T}}>>;
//!include {{KV_VEC4}}
@group(0) @binding(7) var<storage, read_write> out: array<vec4<{{OUT_T}}>>;
@group(0) @binding(8) var<storage, read_write> lse: array<f32>;

//!include attention_gemm_tiles.wgsl

var<private> seq_queries: u32;
var<private> seq_keys: u32;

fn row_keys(i: u32) -> vec2<u32> {
    return visible(i, seq_queries, seq_keys);
}

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) lane: u32) {
//!include attention_batched_qblock.wgsl
    seq_queries = S;
    seq_keys = sk.y;
    let g = h / (params.num_heads / params.num_kv_heads);
    let D4 = params.head_dim / 4u;
    let q0 = sq.x;
    let lse0 = h * params.q_rows + sq.x;
//!include attention_gemm_body.wgsl
}
