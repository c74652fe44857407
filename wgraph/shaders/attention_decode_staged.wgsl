// Split-K (flash-decoding) decode with K/V tiles staged in workgroup memory. Workgroup (c, g, b) attends chunk c
// of the decode query's visible keys for q heads b * G_TILE .. + G_TILE - 1 of kv head g, so every K/V byte is
// read from memory once per kv head (GQA). The fused kernel (attention_decode_fused.wgsl) keeps each lane's
// share of q and of the P.V sums of all the block's heads in registers, which leaves room for one step of
// loads in flight per lane; here a lane's registers hold mostly the next tile's K/V pieces. Per tile of T keys
// (attention_staged_walk.wgsl):
//   0. the tile's K/V pieces, loaded into registers during the previous tile, are stored to workgroup memory
//      (neighbouring lanes take neighbouring 16-byte pieces of a row: coalesced), and the next tile's loads
//      are issued;
//   1. thread (key t % T, part t / T) sums q.k over its part of the head dims for every head of the block;
//   2. the (head, key) pairs add the parts and transform the score;
//   3. each pair finds its head's max over the tile (online softmax) and writes its p;
//   4. thread (unit t % D4, part t / D4) rescales its P.V sums and adds its keys' p * V for every head.
// At the end of the chunk the parts' l and P.V sums are added and the chunk's partial (m, l, acc) per head goes
// to part_ml / part_acc; attention_decode_splitk_combine.wgsl merges the chunks. No subgroup operations.
// Dispatch: (chunks, num_kv_heads, head blocks).
{{ENABLE_F16}}
//!include attention_params.wgsl
//!include attention_decode_splitk_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;   // 16-byte pieces: ELEMS dims each
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read_write> part_ml: array<f32>;
@group(0) @binding(8) var<storage, read_write> part_acc: array<f32>;

//!include attention_staged_consts.wgsl
//!include attention_fused_store_partials.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
//!include attention_splitk_head.wgsl
    if (c >= splitk_count(span)) {
        return;                                   // the whole workgroup: a surplus chunk
    }
    let chunk = splitk_chunk(span);
    let lo = range.x + c * chunk;
    let n = min(chunk, range.y - lo);
    let q0 = h0 * D;
    part_slot = h0 * params.num_chunks + c;
//!include attention_staged_walk.wgsl
}
