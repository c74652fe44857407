// Split-K decode, step 2: merge the chunks' partial softmaxes (m, l, unnormalised acc) of q head h into
// out. The chunk count comes from kv_len (as in the main kernel), so it follows a kv_len read on the GPU;
// every counted chunk saw at least one key. No chunk (every key masked) -> zeros.
// The maximum and the weighted sum of l are tree reductions over the chunks. The weighted sum of the
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

const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D4: u32 = {{MAX_HEAD_DIM}}u / 4u;
const UNROLL: u32 = 4u;
const_assert MAX_D4 <= WG;
var<workgroup> red: array<f32, WG>;
var<workgroup> sums: array<vec4<f32>, WG>;

// Tree reduction over the workgroup (max or sum); every thread returns the result.
fn reduce(t: u32, x: f32, is_max: bool) -> f32 {
    workgroupBarrier();                           // red's previous contents are read
    red[t] = x;
    for (var half: u32 = WG / 2u; half > 0u; half /= 2u) {
        workgroupBarrier();
        if (t < half) {
            red[t] = select(red[t] + red[t + half], max(red[t], red[t + half]), is_max);
        }
    }
    workgroupBarrier();
    return red[0];
}

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let h = wid.y;
    let D4 = params.head_dim / 4u;
    let kv_len = kv_len_now();
    let range = splitk_range(kv_len);
    let n = splitk_count(range.y - range.x);
    let first = h * params.num_chunks;
    var mx: f32 = MASKED;
    for (var c: u32 = t; c < n; c += WG) {
        mx = max(mx, part_ml[(first + c) * 2u]);
    }
    let m = reduce(t, mx, true);
    var ls: f32 = 0.0;
    for (var c: u32 = t; c < n; c += WG) {
        ls += exp(part_ml[(first + c) * 2u] - m) * part_ml[(first + c) * 2u + 1u];
    }
    let l = reduce(t, ls, false);
    var inv_l: f32 = 0.0;
    if (l > 0.0) {
        inv_l = 1.0 / l;                          // l == 0 (no chunk): zeros
    }
    if (is_nan_f32(l)) {
        inv_l = l;                                // NaN in, NaN out (docs/errors.md)
    }

    let groups = WG / D4;
    let d4 = t % D4;
    let grp = t / D4;
    var acc = vec4<f32>(0.0);
    if (grp < groups) {
        for (var c0: u32 = grp; c0 < n; c0 += groups * UNROLL) {
//!repeat u UNROLL
            {
                let c = c0 + ${u}u * groups;
                if (c < n) {
                    acc += exp(part_ml[(first + c) * 2u] - m) * part_acc[(first + c) * D4 + d4];
                }
            }
//!end
        }
    }
    sums[t] = acc;
    workgroupBarrier();
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
