// y = x, 16 bytes per thread per step: the bench's measure of the device's memory bandwidth (bytes read +
// bytes written over the time), against which memory-bound kernels such as the GEMV are read.
struct CopyParams {
  count: u32,  // vec4 words
}

@group(0) @binding(0) var<uniform> params: CopyParams;
@group(0) @binding(1) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4<u32>>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let stride = groups.x * {{WORKGROUP_SIZE_X}}u;
  for (var i = gid.x; i < params.count; i = i + stride) {
    y[i] = x[i];
  }
}
