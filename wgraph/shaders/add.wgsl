// c = a + b, elementwise, same shapes.
{{ENABLE}}
struct AddParams {
  n: u32,
}

@group(0) @binding(0) var<uniform> params: AddParams;
@group(0) @binding(1) var<storage, read> a: array<{{T}}>;
@group(0) @binding(2) var<storage, read> b: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> c: array<{{T}}>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  if (i >= params.n) {
    return;
  }
  c[i] = a[i] + b[i];
}
