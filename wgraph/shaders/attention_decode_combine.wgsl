// Chunked decode, pass 2: merge the num_chunks partial softmaxes of (query i, q head h) into out.
// Threads split the head dims. Chunks with l == 0 saw no key; all of them -> zeros.
// Dispatch: (1, num_heads, seq_len).
{{ENABLE_F16}}
//!include attention_params.wgsl
@group(0) @binding(6) var<storage, read_write> out: array<{{OUT_T}}>;
@group(0) @binding(10) var<storage, read_write> lse: array<f32>;   // [Hq, S]; a 4-byte fallback unless write_lse
@group(0) @binding(7) var<storage, read> part_ml: array<f32>;
@group(0) @binding(8) var<storage, read> part_acc: array<f32>;

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let h = wid.y;
    let i = wid.z;
    let first = (i * params.num_heads + h) * params.num_chunks;
    var m: f32 = MASKED;
    var poisoned = false;                 // a chunk's (m, l) is NaN (a NaN q or k): the row's output is NaN
    var poison: f32 = 0.0;
    for (var c: u32 = 0u; c < params.num_chunks; c++) {
        let mc = part_ml[(first + c) * 2u];
        let lc = part_ml[(first + c) * 2u + 1u];
        if (is_nan_f32(mc) || is_nan_f32(lc)) {   // `lc > 0.0` would skip the chunk silently
            poisoned = true;
            poison = select(lc, mc, is_nan_f32(mc));
        }
        if (lc > 0.0) {
            m = max(m, part_ml[(first + c) * 2u]);
        }
    }
    var l: f32 = 0.0;
    for (var c: u32 = 0u; c < params.num_chunks; c++) {
        let lc = part_ml[(first + c) * 2u + 1u];
        if (lc > 0.0) {
            l += exp(part_ml[(first + c) * 2u] - m) * lc;
        }
    }
    var inv_l: f32 = 0.0;
    if (l > 0.0) {
        inv_l = 1.0 / l;
    }
    for (var d: u32 = t; d < params.head_dim; d += {{WORKGROUP_SIZE_X}}u) {
        var o: f32 = 0.0;
        for (var c: u32 = 0u; c < params.num_chunks; c++) {
            let lc = part_ml[(first + c) * 2u + 1u];
            if (lc > 0.0) {
                o += exp(part_ml[(first + c) * 2u] - m) * part_acc[(first + c) * params.head_dim + d];
            }
        }
        out[q_index(i, h, d)] = {{OUT_T}}(select(o * inv_l, poison, poisoned));
    }
    if (params.write_lse != 0u && t == 0u) {
        lse[h * params.seq_len + i] = select(lse_of(m, l), poison, poisoned);
    }
}
