// Q4_1 by whole blocks for quant_gemv.wgsl (one lane a block): a 20-byte block is 5 words on a word boundary,
// d | m, then 16 quant bytes; a lane loads the 5 (against 2 loads per 8 weights in quant_lanes_q4_1.wgsl, where
// 4 lanes share a block) and its 32 x values are neighbours (8 vectors). Each weight is d * q + m: the min
// multiplies the sum of the lane's x. Sums by chains of fma. One row of x: dequantized in unit_dot, per row.
const_assert LPB == 1u;
//!include quant_x_contiguous.wgsl
const WORDS: u32 = 5u;

//!include quant_x_sums.wgsl
//!include quant_fma_dot.wgsl
//!include quant_units_whole.wgsl

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xsum: XPart) -> f32 {
  var lo = 0.0;
  var hi = 0.0;
  var s = 0.0;
  //!repeat I 4
  lo = fma_dot(nibbles_low(v.w[$I + 1], 0.0), xs[$I], lo);
  hi = fma_dot(nibbles_high(v.w[$I + 1], 0.0), xs[$I + 4], hi);
  //!end
  //!repeat I 8
  s += xsum[$I];
  //!end
  let dm = unpack2x16float(v.w[0]);
  return fma(dm.x, lo + hi, dm.y * s);
}
