// y = x converted to another float type, elementwise (f32 -> f16 rounds to nearest).
{{ENABLE}}
struct CastParams {
  n: u32,
}

@group(0) @binding(0) var<uniform> params: CastParams;
@group(0) @binding(1) var<storage, read> x: array<{{SRC_T}}>;
@group(0) @binding(2) var<storage, read_write> y: array<{{DST_T}}>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  if (i >= params.n) {
    return;
  }
  y[i] = {{DST_T}}(x[i]);
}
