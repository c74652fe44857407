// Split-K decode, step 2: merge the chunks' partial softmaxes (m, l, unnormalised acc) of q head h into
// out. The chunk count comes from kv_len (as in the main kernel), so it follows a kv_len read on the GPU;
// every counted chunk saw at least one key. No chunk (every key masked) -> zeros. Threads split the head
// dims; the chunk weights are computed once per block of WG chunks in workgroup memory.
// Dispatch: (1, num_heads, 1).
{{ENABLE_F16}}
//!include attention_params.wgsl
//!include old_splitk_common.wgsl
@group(0) @binding(6) var<storage, read_write> out: array<{{OUT_T}}>;
@group(0) @binding(7) var<storage, read> part_ml: array<f32>;
@group(0) @binding(8) var<storage, read> part_acc: array<f32>;

const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D: u32 = {{MAX_HEAD_DIM}}u;
const DIMS_PER_THREAD: u32 = (MAX_D + WG - 1u) / WG;
var<workgroup> weight: array<f32, WG>;

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let h = wid.y;
    let D = params.head_dim;
    let kv_len = kv_len_now();
    let range = splitk_range(kv_len);
    let n = splitk_count(range.y - range.x);
    let first = h * params.num_chunks;
    var m: f32 = MASKED;
    for (var c: u32 = 0u; c < n; c++) {
        m = max(m, part_ml[(first + c) * 2u]);
    }
    var l: f32 = 0.0;
    for (var c: u32 = 0u; c < n; c++) {
        l += exp(part_ml[(first + c) * 2u] - m) * part_ml[(first + c) * 2u + 1u];
    }
    var inv_l: f32 = 0.0;
    if (l > 0.0) {
        inv_l = 1.0 / l;
    }
    var o: array<f32, DIMS_PER_THREAD>;
    for (var c0: u32 = 0u; c0 < n; c0 += WG) {
        workgroupBarrier();                   // the previous block's weights are read
        if (c0 + t < n) {
            weight[t] = exp(part_ml[(first + c0 + t) * 2u] - m) * inv_l;
        }
        workgroupBarrier();
        let nb = min(WG, n - c0);
        for (var e: u32 = 0u; e < DIMS_PER_THREAD; e++) {
            let d = t + e * WG;
            if (d < D) {
                var a = o[e];
                for (var c: u32 = 0u; c < nb; c++) {
                    a += weight[c] * part_acc[(first + c0 + c) * D + d];
                }
                o[e] = a;
            }
        }
    }
    for (var e: u32 = 0u; e < DIMS_PER_THREAD; e++) {
        let d = t + e * WG;
        if (d < D) {
            out[h * D + d] = {{OUT_T}}(o[e]);
        }
    }
}
