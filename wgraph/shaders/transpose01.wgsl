// y[b, a, :] = x[a, b, :] for x [A, B, D]: the first two axes swapped (sdpa's [heads, rows, dim] <-> [rows,
// heads, dim]). One invocation per output element; the flat index spans a 2D grid (ctx.grid).
{{ENABLE}}
struct Transpose01Params {
  a: u32,
  b: u32,
  d: u32,
  n: u32,
}

@group(0) @binding(0) var<uniform> params: Transpose01Params;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> y: array<{{T}}>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  if (i >= params.n) {
    return;
  }
  let d = i % params.d;
  let row = i / params.d;          // row = b * A + a in y
  let a = row % params.a;
  let b = row / params.a;
  y[i] = x[(a * params.b + b) * params.d + d];
}
