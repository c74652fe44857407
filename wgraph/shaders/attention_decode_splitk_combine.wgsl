// Split-K decode, step 2: merge the chunks' partial softmaxes (m, l, unnormalised acc) of q head h into
// out. The chunk count comes from kv_len (as in the main kernel), so it follows a kv_len read on the GPU;
// every counted chunk saw at least one key. No chunk (every key masked) -> zeros.
// Each thread merges its chunks' (m, l) as it reads them, then one tree reduction merges the threads' states
// (one read of part_ml, one reduction: the max and the weighted sum of l used to be two). The weighted sum of the
// accumulators is spread over the whole workgroup: thread t takes vec4 t % D4 of the head and every
// GROUPS-th chunk from t / D4, UNROLL loads in flight (a serial walk over the chunks waited on one memory
// latency per chunk and dominated the decode time on the H200); the groups' sums meet in workgroup memory.
// Dispatch: (1, num_heads, 1).
{{ENABLE_F16}}
//!include attention_params.wgsl
//!include attention_decode_splitk_common.wgsl
@group(0) @binding(6) var<storage, read_write> out: array<vec4<{{OUT_T}}>>;
@group(0) @binding(10) var<storage, read_write> lse: array<f32>;   // [Hq, S]; a 4-byte fallback unless write_lse
@group(0) @binding(7) var<storage, read> part_ml: array<f32>;
@group(0) @binding(8) var<storage, read> part_acc: array<vec4<f32>>;

//!include attention_combine_consts.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let h = wid.y;
    let D4 = params.head_dim / 4u;
    let kv_len = kv_len_now();
    let range = splitk_range(kv_len);
    let n = splitk_count(range.y - range.x);
    let first = h * params.num_chunks;
//!include attention_combine_merge.wgsl
    if (t < D4) {
        var o = vec4<f32>(0.0);
        for (var g: u32 = 0u; g < groups; g++) {
            o += sums[g * D4 + t];
        }
        out[h * D4 + t] = vec4<{{OUT_T}}>(o * inv_l);
    }
    if (params.write_lse != 0u && t == 0u) {
        lse[h] = lse_of(m, l);
    }
}
