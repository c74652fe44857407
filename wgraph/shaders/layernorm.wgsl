// y = (x - mean) / sqrt(var + eps) * weight (+ bias) over the last axis: one workgroup per row; the mean, then
// the variance as the mean of (x - mean)^2 (two passes: no cancellation), reduced in f32.
{{ENABLE}}
//!include row_reduce.wgsl

struct LayerNormParams {
  rows: u32,
  dim: u32,
  eps: f32,
  has_bias: u32,
}

@group(0) @binding(0) var<uniform> params: LayerNormParams;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> weight: array<{{T}}>;
@group(0) @binding(3) var<storage, read> bias: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> y: array<{{T}}>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let row = wid.x + wid.y * groups.x;
  if (row >= params.rows) {
    return;
  }
  let base = row * params.dim;
  var s = 0.0;
  for (var i = lid.x; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    s = s + f32(x[base + i]);
  }
  let mean = workgroup_sum(lid.x, s) / f32(params.dim);
  var q = 0.0;
  for (var i = lid.x; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    let d = f32(x[base + i]) - mean;
    q = q + d * d;
  }
  let inv = inverseSqrt(workgroup_sum(lid.x, q) / f32(params.dim) + params.eps);
  for (var i = lid.x; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    var v = (f32(x[base + i]) - mean) * inv * f32(weight[i]);
    if (params.has_bias != 0u) {
      v = v + f32(bias[i]);
    }
    y[base + i] = {{T}}(v);
  }
}
