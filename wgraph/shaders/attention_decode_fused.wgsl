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
// (attention_fused_merge.wgsl); the chunk's partial (m, l, acc) per head goes to part_ml / part_acc, and the
// block's last chunk to finish merges the chunks into out and lse (attention_fused_last_merge.wgsl): one dispatch.
// Dispatch: (chunks, num_kv_heads, head blocks) (grid "splitk", attention_splitk_head.wgsl).
{{ENABLE_F16}}
//!include attention_params.wgsl
//!include attention_decode_splitk_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;   // 16-byte pieces: ELEMS dims each
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(6) var<storage, read_write> out: array<{{Q_T}}>;              // [1, Hq, D]
@group(0) @binding(7) var<storage, read_write> part_ml: array<atomic<u32>>;      // attention_fused_last_merge.wgsl
@group(0) @binding(8) var<storage, read_write> part_acc: array<atomic<u32>>;
@group(0) @binding(10) var<storage, read_write> lse: array<f32>;   // [Hq, 1]; a 4-byte fallback unless write_lse
@group(0) @binding(11) var<storage, read_write> sync_counters: array<atomic<u32>>;

//!include attention_fused_consts.wgsl
//!include attention_fused_last_merge.wgsl

fn out_at(h: u32, d: u32) -> u32 {
    return h * params.head_dim + d;
}

fn lse_at(h: u32) -> u32 {
    return h;
}

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_lane: u32) {
//!include attention_splitk_head.wgsl
    let nc = splitk_count(span);
    if (nc == 0u) {                               // no visible key: the first chunk writes the block's zeros
        if (c == 0u) {
            store_no_keys(sg * sg_size + sg_lane, h0, ng);
        }
        return;
    }
    if (c >= nc) {
        return;                                   // the whole workgroup: a surplus chunk
    }
    let chunk = splitk_chunk(span);
    let lo = range.x + c * chunk;
    let n = min(chunk, range.y - lo);

//!include attention_fused_lanes.wgsl
    let q0 = h0 * D;
//!include attention_fused_q.wgsl

//!include attention_fused_steps.wgsl
    part_first = h0 * params.num_chunks;
    part_slot = part_first + c;
//!include attention_fused_merge.wgsl
    finish_chunk(t, h0, ng, nc, g * head_blocks() + wid.z);
}
