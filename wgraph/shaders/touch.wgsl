// Read x and keep nothing: the bench's L2 prefetch probe (benchmarks/prefetch_probe.py). Each thread xors the
// 16-byte words it reads; y is written only where that xor equals params.never (a value the host picks so no
// real data matches in practice), so the loads cannot be dropped by the compiler and y stays unread. Dispatched
// next to a kernel it does not depend on (no barrier between them), it brings x into the GPU's L2 while that
// kernel runs, for the kernel after both.
struct TouchParams {
  count: u32,  // vec4 words
  never: u32,
}

@group(0) @binding(0) var<uniform> params: TouchParams;
@group(0) @binding(1) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4<u32>>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let stride = groups.x * {{WORKGROUP_SIZE_X}}u;
  var acc = vec4<u32>(0u);
  for (var i = gid.x; i < params.count; i = i + stride) {
    acc = acc ^ x[i];
  }
  let h = acc.x ^ acc.y ^ acc.z ^ acc.w;
  if (h == params.never) {
    y[0] = acc;
  }
}
