// Q4_1 lanes for quant_gemv.wgsl: 20-byte blocks (d f16, m f16, 16 quant bytes), always on a word. Lane t of a
// block's 4 takes quant word t (weights as Q4_0's: x vectors t and 4 + t), each d * q + m: the min m multiplies
// the sum of the lane's x.
const_assert LPB == 4u;
//!include quant_x_interleaved.wgsl

//!include quant_x_sums.wgsl

//!include quant_units_q4_1.wgsl

struct Values {
  v: array<vec4<f32>, 2>,  // q of the low nibbles, of the high nibbles
  dm: vec2<f32>,
}

fn unit_values(u: Unit) -> Values {
  return Values(array<vec4<f32>, 2>(nibbles_low(u.q, 0.0), nibbles_high(u.q, 0.0)), u.dm);
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xsum: XPart) -> f32 {
  return v.dm.x * (dot(v.v[0], xs[0]) + dot(v.v[1], xs[1])) + v.dm.y * (xsum[0] + xsum[1]);
}
