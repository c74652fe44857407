// K/V stored as f32 or f16 (KV_T), read one element at a time through kv_k1 / kv_v1 (widened to f32): every K/V
// load of the tiled, streaming, chunked and subgroup kernels goes through these two functions, so K/V stored
// another way (bf16 words) is another include with the same names. A variant picks it with its KV_SCALAR define.
@group(0) @binding(2) var<storage, read> k: array<{{KV_T}}>;
@group(0) @binding(3) var<storage, read> v: array<{{KV_T}}>;

fn kv_k1(i: u32) -> f32 {
    return f32(k[i]);
}

fn kv_v1(i: u32) -> f32 {
    return f32(v[i]);
}