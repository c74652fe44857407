// Batched fused split-K decode, step 1: attention_decode_fused.wgsl's one-pass chunk kernel (K and V of a step
// loaded together, q.k summed over a slot's lanes by subgroup shuffles, online softmax in registers) over a
// ragged batch with one query per sequence. Workgroup (c, g * blocks + blk, b) attends chunk c of sequence b's
// visible keys for q heads blk * G_TILE .. + G_TILE of kv head g; the chunk split is
// attention_splitk_split.wgsl's, so surplus chunks of a short sequence return at once, and
// attention_batched_combine.wgsl merges the partials. Positions and rows come from
// attention_batched_common.wgsl; the rest is the single-sequence kernel's, described there and included from
// the same files (attention_fused_consts.wgsl, _lanes, _steps, _merge).
{{ENABLE_F16}}
//!include attention_batched_splitk_bindings.wgsl

//!include attention_fused_consts.wgsl
//!include attention_fused_store_partials.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_lane: u32) {
//!include attention_batched_chunk.wgsl

//!include attention_fused_lanes.wgsl
    let q0 = (qrow * params.num_heads + h0) * D;
//!include attention_fused_q.wgsl

//!include attention_fused_steps.wgsl
    part_slot = (b * params.num_heads + h0) * params.num_chunks + c;
//!include attention_fused_merge.wgsl
}
