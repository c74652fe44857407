// linear_rope_kv_append on a QuantizedWeight: the quantized GEMV (quant_gemv_core.wgsl, W as GGML blocks
// dequantized in registers) of the stacked [Wq; Wk; Wv] with RoPE and the K/V append in its epilogue, one
// dispatch: gemv_rope_kv.wgsl's design on the quantized core. The slot's rows are read in "pair order" (feature
// p < n / 2 is element i = p % half of head h = p / half, W row h * D + i, and p + n / 2 its partner i + half),
// so with an even FT one lane holds a rotation pair (a, b) and hands it to rope_kv_write (rope_kv_pair.wgsl).
// No permutation of the blocks on the host: w_row maps a feature to its row. Bias rows are mapped the same way.
{{ENABLE}}

struct QuantGemvRopeKVParams {
//!include quant_gemv_fields.wgsl
//!include rope_kv_fields.wgsl
}

@group(0) @binding(0) var<uniform> params: QuantGemvRopeKVParams;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> blocks: array<u32>;
@group(0) @binding(3) var<storage, read> heads: array<vec4<u32>>;  // the same buffer in 16-byte words
@group(0) @binding(4) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(6) var<storage, read> cos_t: array<f32>;
@group(0) @binding(7) var<storage, read> sin_t: array<f32>;
@group(0) @binding(8) var<storage, read> page_table: array<u32>;
@group(0) @binding(9) var<storage, read> pos_buf: array<u32>;
@group(0) @binding(10) var<storage, read_write> q: array<f32>;
@group(0) @binding(11) var<storage, read_write> k_cache: array<{{T}}>;
@group(0) @binding(12) var<storage, read_write> v_cache: array<{{T}}>;

//!include quant_gemv_core.wgsl
//!include rope_kv_pair.wgsl

//!include gemv_rope_kv_epilogue.wgsl

fn epilogue(slot: u32, at: u32, lane: u32, row0: u32, rows: u32) {
  rope_kv_epilogue(slot, at, lane, row0, rows);
}
