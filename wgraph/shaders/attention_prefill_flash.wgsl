// Flash-attention prefill, register-tiled. A workgroup takes BLOCK_M queries of one q head; each thread
// owns ROWS_PER_THREAD queries (ROW_STEP apart) and, with the TPQ - 1 other lanes of its subgroup that share
// those rows, splits their head dims: lane `part` owns vec4s part, part + TPQ, ... (interleaved, so the
// lanes of a row read neighbouring vec4s of a K/V row: no bank conflicts). A thread keeps its q dims and
// output accumulators in registers for the whole kernel; K/V tiles of TILE_N keys sit in workgroup memory.
// Per tile: load K and V (16-byte loads, zero past head_dim and kv end), barrier; partial q.k per thread,
// summed over the TPQ lanes by a subgroupShuffleXor butterfly (TPQ <= 4: WebGPU guarantees subgroups of at
// least 4 invocations); one online-softmax update per tile; P.V into the registers; barrier. Every K vec4
// read from workgroup memory feeds 4 * R FMAs. Tiles beyond the block's key range (causal, window) are
// never visited, and the blocks with the most keys start first (block index reversed).
// q.k is always f32: summing it in f16 was tried and broke FlashAttention's error rule by 8-85x wherever
// scores are large (peaky softmax), so it would be a silent wrong answer on real activations. P.V is f32 too
// (a tile's sum in vec4<f16> FMAs broke the rule by up to 1.6x), as is the softmax state; K and V tiles are
// f32 in workgroup memory (an f16 V tile, widened at each use, was 0.79-0.95x as fast on an H100).
// Loops over register arrays are unrolled with //!repeat. Dispatch: (num_heads, ceil(seq_len / BLOCK_M), 1).
{{ENABLE_F16}}
//!include attention_prefill_vec4_bindings.wgsl

//!include attention_flash_consts.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) lane: u32) {
    let h = wid.x;
    let i0 = (nwg.y - 1u - wid.y) * BLOCK_M;
    let g = kv_head_of(h);
    let D4 = params.head_dim / 4u;
    let S = params.seq_len;
    let kv_len = kv_len_now();

//!include attention_flash_regs.wgsl
//!repeat r R
    {
        let i = i0 + row0 + ${r}u * ROW_STEP;
        ok[$r] = i < S;
        ob[$r] = (min(i, S - 1u) * params.num_heads + h) * D4;
        var rr = vec2<u32>(0u, 0u);
        if (ok[$r]) {
            rr = key_range(query_pos(i, kv_len), kv_len);
        }
//!include attention_flash_row_init.wgsl
    }
//!end

    let i_last = min(i0 + BLOCK_M, S) - 1u;
    let lo = key_range(query_pos(i0, kv_len), kv_len).x;
    let hi = max(lo, key_range(query_pos(i_last, kv_len), kv_len).y);

//!include attention_flash_tiles.wgsl

//!repeat r R
    if (ok[$r]) {
//!include attention_flash_out.wgsl
        if (params.write_lse != 0u && part == 0u) {
            lse[h * S + i0 + row0 + ${r}u * ROW_STEP] = select(lse_of(m[$r], l[$r]), poison[$r], poisoned[$r]);
        }
    }
//!end
}
