// Rotary embedding, rotate-half form, from tables cos_t/sin_t [table_rows, half]:
//   y[i] = x[i] c - x[i + half] s,  y[i + half] = x[i + half] c + x[i] s,  c, s at position p of the row.
// Row r of x [rows, heads, 2 * half] sits at p = pos + r (+ pos_buf[0] when use_pos_buf): a recorded decode
// step reads its position from the GPU. A position beyond the table writes zeros (never stale data); a GPU one
// is also reported on the device error flag.
{{ENABLE}}
struct RopeParams {
  rows: u32,
  heads: u32,
  half: u32,
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

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let t = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  if (t >= params.rows * params.heads * params.half) {
    return;
  }
  let i = t % params.half;
  let rh = t / params.half;          // row * heads + head
  let r = rh / params.heads;
  let p0 = params.pos + r;  // the host checks an int pos; pos + rows fits in u32
  var p = p0;
  var beyond = p0 >= params.table_rows;
  if (params.use_pos_buf != 0u) {
    // Compared without adding, so a GPU position near 2^32 cannot wrap round to a row of the table.
    let g = pos_buf[0];
    beyond = beyond || g >= params.table_rows - p0;
    if (beyond) {
      report_error(ERR_ROPE_POS, select(p0 + g, 0xFFFFFFFFu, g > 0xFFFFFFFFu - p0), params.table_rows);
    }
    p = p0 + g;
  }
  let base = rh * 2u * params.half;
  if (beyond) {
    y[base + i] = {{T}}(0.0);
    y[base + i + params.half] = {{T}}(0.0);
    return;
  }
  let c = f32(cos_t[p * params.half + i]);
  let s = f32(sin_t[p * params.half + i]);
  let a = f32(x[base + i]);
  let b = f32(x[base + i + params.half]);
  y[base + i] = {{T}}(a * c - b * s);
  y[base + i + params.half] = {{T}}(b * c + a * s);
}
