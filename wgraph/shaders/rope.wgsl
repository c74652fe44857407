// Rotary embedding from tables cos_t/sin_t [table_rows, half]: one invocation per element of x [rows, heads,
// dim] (rope_element.wgsl has the math, the pair layouts and the position rules).
{{ENABLE}}
struct RopeParams {
  rows: u32,
  heads: u32,
  dim: u32,
  half: u32,          // rotary_dim / 2: the table's columns
  interleaved: u32,
  pos: u32,
  use_pos_buf: u32,
  table_rows: u32,
}

@group(0) @binding(0) var<uniform> params: RopeParams;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> cos_t: array<{{T}}>;
@group(0) @binding(3) var<storage, read> sin_t: array<{{T}}>;
@group(0) @binding(4) var<storage, read> pos_buf: array<u32>;
@group(0) @binding(5) var<storage, read_write> y: array<{{T}}>;
//!include device_errors.wgsl
//!include rope_element.wgsl

fn x_at(i: u32) -> f32 {
  return f32(x[i]);
}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  if (e >= params.rows * params.heads * params.dim) {
    return;
  }
  y[e] = {{T}}(rope_element(e));
}
