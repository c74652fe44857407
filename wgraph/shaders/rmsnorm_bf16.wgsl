// rmsnorm.wgsl for bf16 x, weight and y (u32 words of two elements, bf16.wgsl): the same f32 reduction per row;
// the writes are whole words, so a row holds an even number of elements (the op checks) and starts a word.
//!include bf16.wgsl
struct RmsNormParams {
  rows: u32,
  dim: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> params: RmsNormParams;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> weight: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;

var<workgroup> partial: array<f32, {{WORKGROUP_SIZE_X}}>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
//!include rmsnorm_row.wgsl
  for (var i = lid.x; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    let v = bf16_get(x[(base + i) >> 1u], base + i);
    s = s + v * v;
  }
//!include rmsnorm_reduce.wgsl
  for (var p = lid.x; p < params.dim / 2u; p = p + {{WORKGROUP_SIZE_X}}u) {
    let xw = x[(base >> 1u) + p];
    let ww = weight[p];
    y[(base >> 1u) + p] = bf16_pack(bf16_get(xw, 0u) * inv * bf16_get(ww, 0u),
                                    bf16_get(xw, 1u) * inv * bf16_get(ww, 1u));
  }
}
