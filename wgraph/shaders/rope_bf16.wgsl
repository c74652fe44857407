// rope.wgsl for bf16 x and y (u32 words of two elements, bf16.wgsl) with f32 tables (bf16's 8 bits would
// round the angles' cos and sin): one invocation per word, each half by rope_element.wgsl, rounded to nearest
// even. An odd element count keeps the last word's high half as it was: y may be a view ending mid-word, whose
// next element lives there.
//!include bf16.wgsl
struct RopeParams {
  rows: u32,
  heads: u32,
  dim: u32,
  half: u32,
  interleaved: u32,
  pos: u32,
  use_pos_buf: u32,
  table_rows: u32,
}

@group(0) @binding(0) var<uniform> params: RopeParams;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> cos_t: array<f32>;
@group(0) @binding(3) var<storage, read> sin_t: array<f32>;
@group(0) @binding(4) var<storage, read> pos_buf: array<u32>;
@group(0) @binding(5) var<storage, read_write> y: array<u32>;
//!include device_errors.wgsl
//!include rope_element.wgsl

fn x_at(i: u32) -> f32 {
  return bf16_get(x[i >> 1u], i);
}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let w = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  let n = params.rows * params.heads * params.dim;
  if (2u * w >= n) {
    return;
  }
  let lo = rope_element(2u * w);
  if (2u * w + 1u < n) {
    y[w] = bf16_pack(lo, rope_element(2u * w + 1u));
  } else {
    y[w] = (y[w] & 0xFFFF0000u) | bf16_bits(lo);
  }
}
