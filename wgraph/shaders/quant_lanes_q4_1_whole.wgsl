// Q4_1 by whole blocks for quant_gemv.wgsl (one lane a block): a 20-byte block is 5 words on a word boundary,
// d | m, then 16 quant bytes; a lane loads the 5 (against 2 loads per 8 weights in quant_lanes_q4_1.wgsl, where
// 4 lanes share a block) and its 32 x values are neighbours (8 vectors). Each weight is d * q + m: the min
// multiplies the sum of the lane's x. Sums by chains of fma. The quants as values: per row in unit_dot (one row of
// x) or once a block (several; quant_units_whole.wgsl).
const_assert LPB == 1u;
//!include quant_x_contiguous.wgsl
const WORDS: u32 = 5u;

//!include quant_x_sums.wgsl
//!include fma_dot.wgsl
//!include quant_units_whole.wgsl
//!include quant_values_once.wgsl

// Quants 4i .. 4i + 3 of the block (i < 4: low nibbles of quant word i, the block's word i + 1; i >= 4: high)
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  var q: array<vec4<f32>, 8>;
  //!repeat I 4
  q[$I] = nibbles_low(u.w[$I + 1], 0.0);
  q[$I + 4] = nibbles_high(u.w[$I + 1], 0.0);
  //!end
  return q;
}

//!include quant_whole_dm_dot.wgsl
