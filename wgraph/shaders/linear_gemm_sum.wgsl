// The second pass of a split-K GEMM (linear_gemm.wgsl): y[i] = sum over splits z of parts[z * count + i]
// (+ bias[i % n]), one element per thread.
struct GemmSumParams {
  count: u32,   // m * n
  n: u32,
  splits: u32,
  has_bias: u32,
}

@group(0) @binding(0) var<uniform> params: GemmSumParams;
@group(0) @binding(1) var<storage, read> parts: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let i = (wid.x + wid.y * groups.x) * {{WORKGROUP_SIZE_X}}u + t;
  if (i >= params.count) {
    return;
  }
  var s = 0.0;
  for (var z = 0u; z < params.splits; z = z + 1u) {
    s = s + parts[z * params.count + i];
  }
  if (params.has_bias != 0u) {
    s = s + bias[i % params.n];
  }
  y[i] = s;
}
