// elementwise_binary.wgsl for bf16 a, b and c (u32 words of two elements, bf16.wgsl): one invocation per word
// of c, each half indexed as there (row, col of the element; a and b by stride and offset), the same f32
// expression, rounded to nearest even. An odd n keeps the last word's high half as it was: c may be a view
// ending mid-word, whose next element lives there.
//!include elementwise_math.wgsl
//!include bf16.wgsl

struct BinaryParams {
  n: u32,
  cols: u32,
  a_stride: u32,
  a_offset: u32,
  b_stride: u32,
  b_offset: u32,
}

@group(0) @binding(0) var<uniform> params: BinaryParams;
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
@group(0) @binding(3) var<storage, read_write> c: array<u32>;

fn element(i: u32) -> f32 {
  let row = i / params.cols;
  let col = i % params.cols;
  let ia = row * params.a_stride + params.a_offset + col;
  let ib = row * params.b_stride + params.b_offset + col;
  let va = bf16_get(a[ia >> 1u], ia);
  let vb = bf16_get(b[ib >> 1u], ib);
  return {{EXPR}};
}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let w = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  if (2u * w >= params.n) {
    return;
  }
  let lo = element(2u * w);
  if (2u * w + 1u < params.n) {
    c[w] = bf16_pack(lo, element(2u * w + 1u));
  } else {
    c[w] = (c[w] & 0xFFFF0000u) | bf16_bits(lo);
  }
}
