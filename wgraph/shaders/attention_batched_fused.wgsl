// Batched fused split-K decode: attention_decode_fused.wgsl's one-pass chunk kernel (K and V of a step loaded
// together, q.k summed over a slot's lanes by subgroup shuffles, online softmax in registers) over a ragged batch
// with one query per sequence. Workgroup (c, g * blocks + blk, b) attends chunk c of sequence b's visible keys for
// q heads blk * G_TILE .. + G_TILE of kv head g; the chunk split is attention_splitk_split.wgsl's, so surplus
// chunks of a short sequence return at once, and the last of a (sequence, head block)'s chunks to finish merges
// them into out and lse (attention_fused_last_merge.wgsl; a sequence with no visible key: its first chunk writes
// zeros and lse -inf, an empty sequence nothing). Positions and rows come from attention_batched_common.wgsl; the
// rest is the single-sequence kernel's, described there and included from the same files
// (attention_fused_consts.wgsl, _lanes, _steps, _merge, _last_merge).
{{ENABLE_F16}}
//!include attention_batched_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;   // 16-byte pieces: ELEMS dims each
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read_write> out: array<{{Q_T}}>;              // [q rows, Hq, D]
@group(0) @binding(8) var<storage, read_write> lse: array<f32>;                  // [Hq, q rows]
@group(0) @binding(9) var<storage, read_write> part_ml: array<atomic<u32>>;      // attention_fused_last_merge.wgsl
@group(0) @binding(10) var<storage, read_write> part_acc: array<atomic<u32>>;
@group(0) @binding(11) var<storage, read_write> sync_counters: array<atomic<u32>>;

//!include attention_batched_chunks.wgsl

//!include attention_fused_consts.wgsl
//!include attention_fused_last_merge.wgsl

var<private> out_row: u32;         // the sequence's query row

fn out_at(h: u32, d: u32) -> u32 {
    return (out_row * params.num_heads + h) * params.head_dim + d;
}

fn lse_at(h: u32) -> u32 {
    return h * params.q_rows + out_row;
}

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_size) sg_size: u32,
        @builtin(subgroup_invocation_id) sg_lane: u32) {
    let c = wid.x;
//!include attention_batched_head.wgsl
    let span = range.y - range.x;
    let nc = splitk_count(span);
    out_row = sq.x + sq.y - 1u;
    if (nc == 0u) {                              // no visible key: the first chunk writes the block's zeros
        if (c == 0u) {
            store_no_keys(sg * sg_size + sg_lane, h0, ng);
        }
        return;
    }
    if (c >= nc) {
        return;                                  // the whole workgroup: a surplus chunk
    }
    let chunk = splitk_chunk(span);
    let lo = range.x + c * chunk;
    let n = min(chunk, range.y - lo);
    let qrow = out_row;

//!include attention_fused_lanes.wgsl
    let q0 = (qrow * params.num_heads + h0) * D;
//!include attention_fused_q.wgsl

//!include attention_fused_steps.wgsl
    part_first = (b * params.num_heads + h0) * params.num_chunks;
    part_slot = part_first + c;
//!include attention_fused_merge.wgsl
    finish_chunk(t, h0, ng, nc, b * nwg.y + wid.y);
}
