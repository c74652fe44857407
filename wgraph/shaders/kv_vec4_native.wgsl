// K/V stored as f32 or f16 (KV_T), read as vec4s through kv_k4 / kv_v4: every K/V load of the flash kernels goes
// through these two functions, so K/V stored another way (bf16 words) is another include with the same names.
// A variant picks it with its KV_VEC4 define (matrix rows of matrices.toml).
@group(0) @binding(2) var<storage, read> k: array<vec4<{{KV_T}}>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<{{KV_T}}>>;

fn kv_k4(i: u32) -> vec4<{{KV_T}}> {
    return k[i];
}

fn kv_v4(i: u32) -> vec4<{{KV_T}}> {
    return v[i];
}