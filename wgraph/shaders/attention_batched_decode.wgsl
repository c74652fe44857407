// Batched split-K decode, step 1: one query per sequence (a decode step of B requests). Workgroup
// (c, g * blocks + blk, b) attends chunk c of sequence b's visible keys for q heads blk * G_TILE .. + G_TILE
// of kv head g, so every K/V byte is read once per kv head (GQA) and the grid holds B x Hkv x chunks
// workgroups in one dispatch. The chunk split follows attention_decode_splitk_common.wgsl: a function of the
// sequence's visible span and the uniform num_chunks, so a sequence shorter than the capacity the grid was
// planned for leaves its surplus chunks idle (they return at once) and a cache_seqlens read on the GPU needs
// no re-planning. The body is attention_decode_splitk.wgsl's (16-byte coalesced K/V loads, LPR lanes per
// key row, KS key slots, U rows in flight, softmax once per chunk in workgroup memory); it writes each
// head's unnormalised (m, l, acc) to part_ml / part_acc, and attention_batched_combine.wgsl merges them.
// The consts, lanes and the three phases are included from the single-sequence kernel's files
// (attention_splitk_consts.wgsl, _lanes, _steps, and the slots' sums _slots, _partials).
// head_dim % 8 == 0.
{{ENABLE_F16}}
//!include attention_batched_splitk_bindings.wgsl
//!include attention_splitk_consts.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
//!include attention_batched_chunk.wgsl

//!include attention_splitk_lanes.wgsl
//!repeat hh G_TILE
//!repeat e PV4
    {
        var x = vec4<f32>(0.0);
        if (in_slot && ${hh}u < ng) {
            let qb = (qrow * params.num_heads + h0 + ${hh}u) * D + lane * ELEMS + ${e}u * 4u;
            x = vec4<f32>(f32(q[qb]), f32(q[qb + 1u]), f32(q[qb + 2u]), f32(q[qb + 3u]));
        }
        qr[${hh}u * PV4 + ${e}u] = x;
    }
//!end
//!end

//!include attention_splitk_steps.wgsl

    // The slots' sums, one head at a time: red[slot * D + dim].
//!repeat hh G_TILE
    if (${hh}u < ng) {
//!include attention_splitk_slots.wgsl
        let sl = (b * params.num_heads + h0 + ${hh}u) * params.num_chunks + c;
//!include attention_splitk_partials.wgsl
    }
//!end
}
