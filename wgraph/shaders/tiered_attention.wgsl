// Tiered decode/prefill attention: one softmax over a cold part (contiguous or paged, {{KV_T}}) and a hot ring
// of the newest hot_window rows ({{KV_T}}). q is {{Q_T}}, out {{OUT_T}}, accumulation f32.
{{ENABLE_F16}}

//!include tiered_common.wgsl

// q, out and len_buf (bindings 1-3) are declared by tiered_loop.wgsl.
@group(0) @binding(4) var<storage, read> hot_k: array<{{KV_T}}>;
@group(0) @binding(5) var<storage, read> hot_v: array<{{KV_T}}>;
@group(0) @binding(6) var<storage, read> cold_k: array<{{KV_T}}>;
@group(0) @binding(7) var<storage, read> cold_v: array<{{KV_T}}>;
@group(0) @binding(8) var<storage, read> page_table: array<u32>;

fn key_dot(j: u32, kvh: u32) -> f32 {
    let D = params.head_dim;
    var s = 0.0;
    if (j < cold_len) {
        let base = (cold_row(j) * params.num_kv_heads + kvh) * D;
        for (var d = 0u; d < D; d = d + 1u) {
            s = s + q_sh[d] * f32(cold_k[base + d]);
        }
        return s;
    }
    return hot_dot(j, kvh);
}

fn value(j: u32, kvh: u32, d: u32) -> f32 {
    if (j < cold_len) {
        return f32(cold_v[(cold_row(j) * params.num_kv_heads + kvh) * params.head_dim + d]);
    }
    return hot_value(j, kvh, d);
}

//!include tiered_loop.wgsl
