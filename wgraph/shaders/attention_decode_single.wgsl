// One-pass decode: the fused split-K kernel (attention_decode_fused.wgsl) with every visible key in one chunk, so
// the merged (m, l, acc) is the answer and no combine pass runs. Workgroup (0, g, b) walks all the decode
// query's visible keys for the q heads b * G_TILE .. + G_TILE - 1 of kv head g: K and V of a step loaded together
// (attention_fused_steps.wgsl), the slots merged (attention_fused_merge.wgsl), then out = acc / l and lse written
// as the combine writes them (l == 0: zeros and lse -inf; NaN in, NaN out). One dispatch instead of two; the
// registry serves one q head a workgroup (G_TILE 1: Hq workgroups, a GQA group's K/V rows read once per q head,
// from L2), and the planner takes it where the storage holds few keys (max_kv_span); forced over more it only walks more
// steps. Dispatch: (1, num_kv_heads, head blocks).
{{ENABLE_F16}}
//!include attention_params.wgsl
@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;   // 16-byte pieces: ELEMS dims each
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(6) var<storage, read_write> out: array<{{Q_T}}>;   // [1, Hq, D]
@group(0) @binding(10) var<storage, read_write> lse: array<f32>;      // [Hq, 1]; a 4-byte fallback unless write_lse
//!include attention_decode_keys.wgsl

const G_TILE: u32 = {{G_TILE}}u;   // q heads of one kv head a workgroup serves at once
//!include attention_fused_consts.wgsl

fn out_at(h: u32, d: u32) -> u32 {
    return h * params.head_dim + d;
}

fn lse_at(h: u32) -> u32 {
    return h;
}

//!include attention_single_store.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_lane: u32) {
//!include attention_splitk_head.wgsl
    out_head = h0;
    let lo = range.x;
    let n = span;                                // every visible key: one chunk (c is 0)
    if (n == 0u) {
        store_no_keys(sg * sg_size + sg_lane, ng);   // the whole workgroup (n is uniform)
        return;
    }

//!include attention_fused_lanes.wgsl
    let q0 = h0 * D;
//!include attention_fused_q.wgsl

//!include attention_fused_steps.wgsl
//!include attention_fused_merge.wgsl
}
