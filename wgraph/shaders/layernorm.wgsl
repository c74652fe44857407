// y = (x - mean) / sqrt(var + eps) * weight (+ bias) over the last axis: one workgroup per row; the mean, then
// the variance as the mean of (x - mean)^2 (two passes: no cancellation), reduced in f32.
{{ENABLE}}
//!include row_reduce.wgsl
//!include is_nan.wgsl

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
  // the sum of a finite row overflows f32 past ~3.4e38 / dim (a row of f32's max gave inf - inf = NaN where
  // float64 gives 0; [1e38, -1e38] x 4 reached inf + -inf = NaN in the tree): such a row takes its mean from the
  // sum of x / dim, which cannot overflow (a row with an inf or NaN is not finite either way and stays NaN).
  // Finiteness is tested on the bits: a compiler may fold float comparisons with inf or NaN.
  let inv_dim = 1.0 / f32(params.dim);
  var s = 0.0;
  var s_small = 0.0;
  for (var i = lid.x; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    let v = f32(x[base + i]);
    s = s + v;
    s_small = s_small + v * inv_dim;
  }
  let total = workgroup_sum(lid.x, s);
  let total_small = workgroup_sum(lid.x, s_small);
  let mean = select(total / f32(params.dim), total_small, !is_finite_f32(total) && is_finite_f32(total_small));
  var q = 0.0;
  for (var i = lid.x; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    let d = f32(x[base + i]) - mean;
    q = q + d * d;
  }
  let inv = inverseSqrt(workgroup_sum(lid.x, q) / f32(params.dim) + params.eps);
  for (var i = lid.x; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    // var past f32's range makes inv 0 (the documented zeros); a deviation that overflowed itself (x = 3e38,
    // mean = -2e38) would make inf * 0 = NaN there
    var v = select((f32(x[base + i]) - mean) * inv, 0.0, inv == 0.0) * f32(weight[i]);
    if (params.has_bias != 0u) {
      v = v + f32(bias[i]);
    }
    y[base + i] = {{T}}(v);
  }
}
