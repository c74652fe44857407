// Batched flash attention: attention_prefill_flash.wgsl's register-tiled kernel over a ragged batch
// (attention_varlen, attention_kvcache with several queries per sequence). Workgroup (h, b, z) takes q head h
// of sequence b, query block nblocks - 1 - z: the block index is the slowest of the grid, so the blocks with the
// most keys of every sequence start first and the short ones fill the tail; a block past the sequence's queries
// returns at once, so one dispatch of (Hq, B, ceil(max_q / BLOCK_M)) serves any batch. Positions, masks and rows come from attention_batched_common.wgsl; everything else (registers, tiles,
// the subgroup butterfly, NaN handling, packed f16 P.V) is the single-sequence kernel's, described there and
// included from the same files (attention_flash_consts.wgsl, _regs, _row_init, _tiles, _out).
{{ENABLE_F16}}
//!include attention_batched_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<vec4<{{Q_T}}>>;
//!include {{KV_VEC4}}
@group(0) @binding(7) var<storage, read_write> out: array<vec4<{{OUT_T}}>>;
@group(0) @binding(8) var<storage, read_write> lse: array<f32>;

//!include attention_flash_consts.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) lane: u32) {
//!include attention_batched_qblock.wgsl
    let g = h / (params.num_heads / params.num_kv_heads);
    let D4 = params.head_dim / 4u;

//!include attention_flash_regs.wgsl
//!repeat r R
    {
        let i = i0 + row0 + ${r}u * ROW_STEP;
        ok[$r] = i < S;
        ob[$r] = ((sq.x + min(i, S - 1u)) * params.num_heads + h) * D4;
        var rr = vec2<u32>(0u, 0u);
        if (ok[$r]) {
            rr = visible(i, S, sk.y);
        }
//!include attention_flash_row_init.wgsl
    }
//!end

    let i_last = min(i0 + BLOCK_M, S) - 1u;
    let lo = visible(i0, S, sk.y).x;
    let hi = max(lo, visible(i_last, S, sk.y).y);

//!include attention_flash_tiles.wgsl

//!repeat r R
    if (ok[$r]) {
//!include attention_flash_out.wgsl
        if (params.write_lse != 0u && part == 0u) {
            lse[h * params.q_rows + sq.x + i0 + row0 + ${r}u * ROW_STEP] = select(lse_of(m[$r], l[$r]), poison[$r], poisoned[$r]);
        }
    }
//!end
}
