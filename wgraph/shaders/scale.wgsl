// y = x * factor, elementwise. The flat index spans a 2D grid so large tensors fit the workgroup limit.
{{ENABLE}}
struct ScaleParams {
  n: u32,
  factor: f32,
}

@group(0) @binding(0) var<uniform> params: ScaleParams;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> y: array<{{T}}>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  if (i >= params.n) {
    return;
  }
  y[i] = x[i] * {{T}}(params.factor);
}
