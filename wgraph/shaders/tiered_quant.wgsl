// Tiered attention with a quantized cold part: cold K/V are kv_quantize's format ({{BITS}}-bit signed,
// {{VALS_PER_WORD}} per u32, one f16 scale per (row, kv head)), contiguous or paged; the hot ring is f16.
// q is {{Q_T}}, out {{OUT_T}}, accumulation f32.
enable f16;

//!include tiered_common.wgsl

// q, out and len_buf (bindings 1-3) are declared by tiered_loop.wgsl.
@group(0) @binding(4) var<storage, read> hot_k: array<f16>;
@group(0) @binding(5) var<storage, read> hot_v: array<f16>;
@group(0) @binding(6) var<storage, read> cold_k: array<u32>;
@group(0) @binding(7) var<storage, read> cold_v: array<u32>;
@group(0) @binding(8) var<storage, read> cold_k_scale: array<f16>;
@group(0) @binding(9) var<storage, read> cold_v_scale: array<f16>;
@group(0) @binding(10) var<storage, read> page_table: array<u32>;

//!include kv_unpack.wgsl

fn key_dot(j: u32, kvh: u32) -> f32 {
    let D = params.head_dim;
    var s = 0.0;
    if (j < cold_len) {
        let rh = cold_row(j) * params.num_kv_heads + kvh;
        let words = D / VALS_PER_WORD;
        let base = rh * words;
        for (var w = 0u; w < words; w = w + 1u) {
            let word = cold_k[base + w];
            for (var k = 0u; k < VALS_PER_WORD; k = k + 1u) {
                s = s + q_sh[w * VALS_PER_WORD + k] * unpack_value(word, k);
            }
        }
        return s * f32(cold_k_scale[rh]);
    }
    return hot_dot(j, kvh);
}

fn value(j: u32, kvh: u32, d: u32) -> f32 {
    if (j < cold_len) {
        let rh = cold_row(j) * params.num_kv_heads + kvh;
        let word = cold_v[rh * (params.head_dim / VALS_PER_WORD) + d / VALS_PER_WORD];
        return unpack_value(word, d) * f32(cold_v_scale[rh]);
    }
    return hot_value(j, kvh, d);
}

//!include tiered_loop.wgsl
