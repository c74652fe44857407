// Q8_0 by whole blocks and integer dots (a tuning candidate): the blocks as quant_lanes_q8_0_whole.wgsl (a lane
// loads a block's 9 words and realigns an even block's quant words), x rounded to int8 as it is staged
// (quant_x_i8_staged.wgsl). A weight is d * q: sum d * q * x = d * step * dot(q, xq), the quant words as they are.
const_assert LPB == 1u;
//!include quant_x_i8_staged.wgsl
const WORDS: u32 = 9u;

//!include quant_units_whole.wgsl
//!include quant_i8_whole_dot.wgsl

struct Values {
  lo: vec4<u32>,  // weights 0-15
  hi: vec4<u32>,  // weights 16-31
  d: f32,
}

fn unit_values(u: Unit) -> Values {
  var q: array<u32, 8>;
  //!repeat I 8
  q[$I] = quant_word(u.w[$I], u.w[$I + 1], u.odd);
  //!end
  return Values(vec4<u32>(q[0], q[1], q[2], q[3]), vec4<u32>(q[4], q[5], q[6], q[7]), block_d(u.w[0], u.odd));
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  // the step last: d * step may be below f32's normal range where the product is not (quant_i8_round.wgsl)
  return xp.step * (v.d * f32(i8_block_dot(v.lo, v.hi, xp)));
}
