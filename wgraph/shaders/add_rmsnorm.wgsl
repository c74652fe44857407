// The residual add and the next RMSNorm in one pass over a row: sum = x + r, y = sum / sqrt(mean(sum^2) + eps)
// * weight. One workgroup per row, tree reduction in f32 (as rmsnorm.wgsl). Each invocation reads back only the
// sum elements it wrote itself, so the second loop needs no barrier on `sum`.
{{ENABLE}}
struct AddRmsNormParams {
  rows: u32,
  dim: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> params: AddRmsNormParams;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> r: array<{{T}}>;
@group(0) @binding(3) var<storage, read> weight: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> sum: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> y: array<{{T}}>;

var<workgroup> partial: array<f32, {{WORKGROUP_SIZE_X}}>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
//!include rmsnorm_row.wgsl
  for (var i = lid.x; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    let v = {{T}}(f32(x[base + i]) + f32(r[base + i]));
    sum[base + i] = v;
    s = s + f32(v) * f32(v);
  }
//!include rmsnorm_reduce.wgsl
  for (var i = lid.x; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    y[base + i] = {{T}}(f32(sum[base + i]) * inv * f32(weight[i]));
  }
}
