// Reads x once, 16 bytes per thread per step, and writes nothing but where a thread's sum equals params.magic
// (the sum is kept so the loads are not dropped; the bench's value never occurs in practice, and a test sets it
// to one thread's sum): what a pass that only reads those bytes reaches, the ceiling of a GEMV's weight reads.
struct ReadParams {
  count: u32,  // vec4 words
  magic: u32,  // the lane sum of a thread's words that makes it write them
}

@group(0) @binding(0) var<uniform> params: ReadParams;
@group(0) @binding(1) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4<u32>>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let stride = groups.x * {{WORKGROUP_SIZE_X}}u;
  var s = vec4<u32>(0u);
  for (var i = gid.x; i < params.count; i = i + stride) {
    s = s + x[i];
  }
  if (s.x + s.y + s.z + s.w == params.magic) {
    y[gid.x % arrayLength(&y)] = s;
  }
}
