// Streaming attention: one workgroup per (query, q head) over all its visible keys, with an online softmax
// across chunks of WORKGROUP_SIZE keys (see attention_stream_core.wgsl), so any kv_len works and workgroup
// memory stays under 1 KB. The prefill fallback for any head dim, and the plain (no subgroup) decode.
// Dispatch: (seq_len, num_heads, 1).
{{ENABLE_F16}}
//!include attention_params.wgsl
//!include attention_kv.wgsl
//!include attention_stream_core.wgsl
@group(0) @binding(6) var<storage, read_write> out: array<{{OUT_T}}>;
@group(0) @binding(10) var<storage, read_write> lse: array<f32>;   // [Hq, S]; a 4-byte fallback unless write_lse

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = wid.x;
    let h = wid.y;
    let kv_len = kv_len_now();
    let range = key_range(query_pos(i, kv_len), kv_len);
    var acc: array<f32, DIMS_PER_THREAD>;
    let ml = attend_range(i, h, t, range.x, range.y, &acc);
    var inv_l: f32 = 0.0;
    if (ml.y > 0.0) {
        inv_l = 1.0 / ml.y;           // a row with every key masked stays 0, never NaN
    }
    if (is_nan_f32(ml.y)) {
        inv_l = ml.y;                 // NaN in, NaN out (docs/errors.md), not through 0 * NaN alone
    }
    for (var n: u32 = 0u; n < DIMS_PER_THREAD; n++) {
        let d = t + n * WG;
        if (d < params.head_dim) {
            out[q_index(i, h, d)] = {{OUT_T}}(acc[n] * inv_l);
        }
    }
    if (params.write_lse != 0u && t == 0u) {
        lse[h * params.seq_len + i] = lse_of(ml.x, ml.y);
    }
}
