// Q4_0 by whole blocks and integer dots (a tuning candidate): the blocks as quant_lanes_q4_0_whole.wgsl (a lane
// loads a block's 5 words and realigns an even block's quant words), x rounded to int8 as it is staged
// (quant_x_i8_staged.wgsl). A weight is d * (q - 8): sum d * (q - 8) * x = d * step * (dot(q, xq) - 8 * sum(xq)),
// the quants' nibbles (0..15) being int8 values as they are.
const_assert LPB == 1u;
//!include quant_x_i8_staged.wgsl
const WORDS: u32 = 5u;

//!include quant_units_whole.wgsl
//!include quant_i8_whole_dot.wgsl

struct Values {
  lo: vec4<u32>,  // weights 0-15: the low nibbles of the 4 quant words
  hi: vec4<u32>,  // weights 16-31: their high nibbles
  d: f32,
}

fn unit_values(u: Unit) -> Values {
  let w = vec4<u32>(quant_word(u.w[0], u.w[1], u.odd), quant_word(u.w[1], u.w[2], u.odd),
                    quant_word(u.w[2], u.w[3], u.odd), quant_word(u.w[3], u.w[4], u.odd));
  return Values(w & vec4<u32>(0x0F0F0F0Fu), (w >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu), block_d(u.w[0], u.odd));
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  // the step last: d * step may be below f32's normal range where the product is not (quant_i8_round.wgsl)
  return xp.step * (v.d * (f32(i8_block_dot(v.lo, v.hi, xp)) - 8.0 * xp.sum));
}
