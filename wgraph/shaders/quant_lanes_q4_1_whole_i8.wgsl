// Q4_1 by whole blocks and integer dots (a tuning candidate): the blocks as quant_lanes_q4_1_whole.wgsl (5 words on
// a word boundary: d | m, then the quants), x rounded to int8 as it is staged (quant_x_i8_staged.wgsl). A weight is
// d * q + m: sum (d * q + m) * x = step * (d * dot(q, xq) + m * sum(xq)).
const_assert LPB == 1u;
//!include quant_x_i8_staged.wgsl
const WORDS: u32 = 5u;

//!include quant_units_whole.wgsl
//!include quant_i8_whole_dot.wgsl

struct Values {
  lo: vec4<u32>,  // weights 0-15: the low nibbles of the 4 quant words
  hi: vec4<u32>,  // weights 16-31: their high nibbles
  dm: vec2<f32>,
}

fn unit_values(u: Unit) -> Values {
  let w = vec4<u32>(u.w[1], u.w[2], u.w[3], u.w[4]);
  return Values(w & vec4<u32>(0x0F0F0F0Fu), (w >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu), unpack2x16float(u.w[0]));
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return xp.step * fma(v.dm.x, f32(i8_block_dot(v.lo, v.hi, xp)), v.dm.y * xp.sum);
}
