// Batched split-K decode, step 2: workgroup (0, h, b) merges the chunks' partial softmaxes (m, l, acc) of
// sequence b, q head h into out (and lse). The chunk count comes from the sequence's length as in step 1.
// No chunk (every key masked, or an empty sequence) -> zeros and lse -inf. Threads split the chunks
// (tree reductions for m and l) and the head dims (vec4s). Dispatch: (1, num_heads, B). The merge is
// attention_decode_splitk_combine.wgsl's, included from the same files (attention_combine_consts.wgsl,
// attention_combine_merge.wgsl).
{{ENABLE_F16}}
//!include attention_batched_common.wgsl
@group(0) @binding(7) var<storage, read_write> out: array<vec4<{{OUT_T}}>>;
@group(0) @binding(8) var<storage, read_write> lse: array<f32>;
@group(0) @binding(9) var<storage, read> part_ml: array<f32>;
@group(0) @binding(10) var<storage, read> part_acc: array<vec4<f32>>;

const CHUNK_STEP: u32 = {{CHUNK_STEP}}u;
//!include attention_splitk_split.wgsl
//!include attention_combine_consts.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let h = wid.y;
    let b = wid.z;
    let D4 = params.head_dim / 4u;
    let sq = seq_q(b);
    let sk = seq_k(b);
    if (sq.y == 0u) {
        return;
    }
    let range = visible(sq.y - 1u, sq.y, sk.y);
    let n = splitk_count(range.y - range.x);
    let first = (b * params.num_heads + h) * params.num_chunks;
//!include attention_combine_merge.wgsl
    let row = sq.x + sq.y - 1u;
    if (t < D4) {
        var o = vec4<f32>(0.0);
        for (var gg: u32 = 0u; gg < groups; gg++) {
            o += sums[gg * D4 + t];
        }
        out[(row * params.num_heads + h) * D4 + t] = vec4<{{OUT_T}}>(o * inv_l);
    }
    if (params.write_lse != 0u && t == 0u) {
        lse[h * params.q_rows + row] = lse_of(m, l);
    }
}
