// y = softmax(x) over the last axis: one workgroup per row; max, then sum of exp(x - max), both reduced in
// f32. A row whose every value is -inf (a fully masked row) comes out as zeros, never NaN; a row holding NaN
// or +inf comes out as NaN, as numpy's (the max pass counts NaN as +inf: WGSL's max may drop a NaN).
{{ENABLE}}
//!include elementwise_math.wgsl
//!include row_reduce.wgsl

struct SoftmaxParams {
  rows: u32,
  dim: u32,
}

@group(0) @binding(0) var<uniform> params: SoftmaxParams;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> y: array<{{T}}>;
//!include row_max.wgsl

// exp(x - m), exactly 0 below exp's f32 range (and for x = -inf, whatever m is)
fn shifted_exp(v: f32, m: f32) -> f32 {
  let d = v - m;
  return select(exp_reduced(d), 0.0, d < -104.0);
}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let row = wid.x + wid.y * groups.x;
  if (row >= params.rows) {
    return;
  }
  let base = row * params.dim;
  // NaN from the uniform, out of constant evaluation (WGSL has no literal for it)
  let nan = bitcast<f32>(0x7fc00000u | (params.dim & 0u));
  let m = row_max_nan_as_inf(lid.x, base);
  var s = 0.0;
  for (var i = lid.x; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    s = s + shifted_exp(f32(x[base + i]), m);
  }
  s = workgroup_sum(lid.x, s);
  let inv = select(1.0 / s, 0.0, s == 0.0);
  // on the bits, once a row: a compiler that assumes no infinities may fold `m == inf` to false
  let poisoned = is_inf_f32(m);
  for (var i = lid.x; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    y[base + i] = {{T}}(select(shifted_exp(f32(x[base + i]), m) * inv, nan, poisoned));
  }
}
