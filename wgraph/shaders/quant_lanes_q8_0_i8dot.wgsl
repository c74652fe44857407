// Q8_0 lanes by integer dot products (a tuning candidate): the blocks and the lanes as quant_lanes_q8_0.wgsl,
// but x rounded to int8 (quant_i8_x.wgsl) and each row's 4 weights one dot4I8Packed of the quant word as it is
// stored: sum d * q * x = d * step * dot(q, xq).
const_assert LPB == 8u;
//!include quant_x_interleaved.wgsl

//!include quant_i8_x.wgsl

//!include quant_units_d_words.wgsl

alias Values = Unit;

fn unit_values(u: Unit) -> Values {
  return u;
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return v.d * xp.step * f32(dot4I8Packed(v.q, xp.q[0]));
}
