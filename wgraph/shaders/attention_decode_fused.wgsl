// Split-K (flash-decoding) decode in one pass per chunk, with subgroups. Workgroup (c, g, b) attends chunk c
// of the decode query's visible keys for the q heads b * G_TILE .. + G_TILE - 1 of kv head g: every K/V byte
// is read from memory once per kv head (GQA), and K and V of a step are loaded together.
//
// A key row of head_dim values is split over LPR = head_dim / DIMS_PER_LANE lanes (a "slot"; the planner keeps
// LPR a power of two), neighbours in one subgroup where a subgroup holds LPR lanes. Each lane holds PPL
// 16-byte pieces of the row (the slot's lanes read neighbouring pieces: coalesced) and its dims of the G_TILE
// q heads in registers. Per step a slot takes U keys: partial q.k per (key, head), summed over the slot's
// lanes by a subgroupShuffleXor butterfly (no workgroup memory, no barrier; where subgroups are smaller than
// LPR, through workgroup memory with two barriers a step), then one online-softmax update per head (running
// max m, sum l and the P.V accumulator, all in registers) with the V pieces loaded in the same step. The next
// step's K/V loads are issued before a step's math (software pipelining). At the end of the chunk the KS slots
// merge their (m, l, acc): the slots of a subgroup by shuffles, the subgroups' states in workgroup memory
// (attention_fused_merge.wgsl); the chunk's partial (m, l, acc) per head goes to part_ml / part_acc, and
// attention_decode_splitk_combine.wgsl merges the chunks.
// Dispatch: (chunks, num_kv_heads, head blocks) (grid "splitk", attention_splitk_head.wgsl).
{{ENABLE_F16}}
//!include attention_splitk_bindings.wgsl

//!include attention_fused_consts.wgsl
//!include attention_fused_store_partials.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_lane: u32) {
//!include attention_splitk_head.wgsl
//!include attention_splitk_chunk.wgsl

//!include attention_fused_lanes.wgsl
    let q0 = h0 * D;
//!include attention_fused_q.wgsl

//!include attention_fused_steps.wgsl
    part_slot = h0 * params.num_chunks + c;
//!include attention_fused_merge.wgsl
}
