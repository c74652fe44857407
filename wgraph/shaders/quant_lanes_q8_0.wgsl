// Q8_0 lanes for quant_gemv.wgsl: 34-byte blocks (d f16, 32 int8 quants), on a word (even block: quants start
// mid-word) or mid-word (odd: d is the upper half of a word). Lane t of a block's 8 takes quant word t: weights
// 4t..4t+3 (x vector t), each d * q.
const_assert LPB == 8u;
//!include quant_x_interleaved.wgsl

//!include quant_x_plain.wgsl

//!include quant_units_d_words.wgsl

struct Values {
  v: vec4<f32>,
  d: f32,
}

fn unit_values(u: Unit) -> Values {
  return Values(bytes_signed(u.q), u.d);
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return v.d * dot(v.v, xs[0]);
}
