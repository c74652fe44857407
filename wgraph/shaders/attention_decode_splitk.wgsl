// Split-K (flash-decoding) decode, step 1. Workgroup (c, g, b) attends chunk c of the decode query's
// visible keys for the q heads b * G_TILE .. b * G_TILE + G_TILE - 1 of kv head g, so every K/V byte is read
// from memory once per kv head, not once per q head (GQA). It writes each head's unnormalised (m, l, acc)
// to part_ml / part_acc; attention_decode_splitk_combine.wgsl merges the chunks.
//
// Memory is what bounds decode, so loads are 16 bytes and coalesced: a K/V row of head_dim values is
// LPR = head_dim / ELEMS 16-byte pieces, and LPR consecutive threads (the "lanes" of one key slot) read one
// row's pieces side by side; KS = WG / LPR slots read KS rows at once, each thread U rows in flight.
//   1. scores: a thread dots its piece of U keys with its piece of the G_TILE q heads (q in registers);
//      the LPR partial dots of a key go through workgroup memory (no subgroup size assumed) and one thread
//      per (key, head) sums them into sc. Every key of the chunk is visible (the chunk lies inside
//      key_range()), so there is no mask.
//   2. softmax once per chunk (the chunk fits sc: the planner sizes chunks <= CHUNK_MAX): max and sum
//      per head by a two-level reduction; sc holds p = exp(s - m).
//   3. p.V: the same thread layout reads V pieces and accumulates G_TILE heads x ELEMS dims in registers;
//      the KS slots' sums meet in workgroup memory at the end, one head at a time.
// Dispatch: (chunks, num_kv_heads, head blocks) (grid "splitk", attention_splitk_head.wgsl).
// head_dim % 8 == 0 (whole 16-byte pieces for f16 and f32). Loops over register arrays are //!repeat.
{{ENABLE_F16}}
//!include attention_splitk_bindings.wgsl

//!include attention_splitk_consts.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
//!include attention_splitk_head.wgsl
//!include attention_splitk_chunk.wgsl

//!include attention_splitk_lanes.wgsl
//!repeat hh G_TILE
//!repeat e PV4
    {
        var x = vec4<f32>(0.0);
        if (in_slot && ${hh}u < ng) {
            let qb = (h0 + ${hh}u) * D + lane * ELEMS + ${e}u * 4u;
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
        let sl = (h0 + ${hh}u) * params.num_chunks + c;
//!include attention_splitk_partials.wgsl
    }
//!end
}
