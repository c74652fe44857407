// y = x / sqrt(mean(x^2) + eps) * weight over the last axis; one workgroup per row, tree reduction in f32.
{{ENABLE}}
struct RmsNormParams {
  rows: u32,
  dim: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> params: RmsNormParams;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> weight: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> y: array<{{T}}>;

var<workgroup> partial: array<f32, {{WORKGROUP_SIZE_X}}>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
//!include rmsnorm_row.wgsl
  for (var i = lid.x; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    let v = f32(x[base + i]);
    s = s + v * v;
  }
//!include rmsnorm_reduce.wgsl
  for (var i = lid.x; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    y[base + i] = {{T}}(f32(x[base + i]) * inv * f32(weight[i]));
  }
}
