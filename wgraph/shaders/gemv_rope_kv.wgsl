// linear_rope_kv_append: the GEMV (gemv_core.wgsl) of the stacked [Wq; Wk; Wv] with RoPE and the K/V append in
// its epilogue, one dispatch. The slot's rows are read in "pair order": feature p < n / 2 is element i = p % half
// of head h = p / half (W row h * D + i) and p + n / 2 its partner i + half (W row h * D + half + i), so with an
// even FT (slot features f < FT / 2 and f + FT / 2, as swiglu's gates and ups) one lane holds a rotation pair
// (a, b) and hands it to rope_kv_write (rope_kv_pair.wgsl: q rotated into q, k rotated and v into the caches at
// the row's position; positions beyond the tables or the cache reported on the device error flag). No
// permutation of W on the host: w_row maps a feature to its row. Bias rows are mapped the same way.
{{ENABLE}}

struct GemvRopeKVParams {
//!include gemv_fields.wgsl
//!include rope_kv_fields.wgsl
}

@group(0) @binding(0) var<uniform> params: GemvRopeKVParams;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<{{W_WORD}}>;
@group(0) @binding(3) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> cos_t: array<f32>;
@group(0) @binding(6) var<storage, read> sin_t: array<f32>;
@group(0) @binding(7) var<storage, read> page_table: array<u32>;
@group(0) @binding(8) var<storage, read> pos_buf: array<u32>;
@group(0) @binding(9) var<storage, read_write> q: array<f32>;
@group(0) @binding(10) var<storage, read_write> k_cache: array<{{T}}>;
@group(0) @binding(11) var<storage, read_write> v_cache: array<{{T}}>;

//!include gemv_core.wgsl
//!include rope_kv_pair.wgsl

//!include gemv_rope_kv_epilogue.wgsl

fn epilogue(slot: u32, at: u32, lane: u32) {
  rope_kv_epilogue(slot, at, lane, params.row0, params.m);
}
