// elementwise_unary.wgsl for bf16 x and y (u32 words of two elements, bf16.wgsl): one invocation per word,
// the same f32 expression on each half, rounded to nearest even. An odd n keeps the last word's high half as it
// was: y may be a view ending mid-word, whose next element lives there.
//!include elementwise_math.wgsl
//!include bf16.wgsl

struct UnaryParams {
  n: u32,
  alpha: f32,
}

@group(0) @binding(0) var<uniform> params: UnaryParams;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

fn expr(v: f32, alpha: f32) -> f32 {
  return {{EXPR}};
}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let w = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  if (2u * w >= params.n) {
    return;
  }
  let word = x[w];
  let lo = expr(bf16_get(word, 0u), params.alpha);
  if (2u * w + 1u < params.n) {
    y[w] = bf16_pack(lo, expr(bf16_get(word, 1u), params.alpha));
  } else {
    y[w] = (y[w] & 0xFFFF0000u) | bf16_bits(lo);
  }
}
