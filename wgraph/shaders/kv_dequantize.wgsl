// Inverse of kv_quantize for n_rows linear rows: x = q * scale, in {{T}}.
enable f16;

struct KVDequantizeParams {
    n_rows: u32,
    kv_heads: u32,
    head_dim: u32,
}

@group(0) @binding(0) var<uniform> params: KVDequantizeParams;
@group(0) @binding(1) var<storage, read> packed: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<f16>;
@group(0) @binding(3) var<storage, read_write> dst: array<{{T}}>;

//!include kv_unpack.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * {{WORKGROUP_SIZE_X}}u;
    let D = params.head_dim;
    if (idx >= params.n_rows * params.kv_heads * D) {
        return;
    }
    let rh = idx / D;
    let d = idx % D;
    let word = packed[rh * (D / VALS_PER_WORD) + d / VALS_PER_WORD];
    // q * scale lies within scale / 2 of the value quantized, which an f16 held: an f16 row's -65504 (scale 516,
    // q -127) is -65532 here, which rounded to -inf in f16. Held at the output's range, it is the nearest f16, -65504.
    // A select, not clamp: a NaN scale (a row that held a NaN) must stay NaN, and clamp(NaN) gave -OUT_MAX.
    let value = unpack_value(word, d) * f32(scales[rh]);
    dst[idx] = {{T}}(select(value, sign(value) * {{OUT_MAX}}, abs(value) > {{OUT_MAX}}));
}
