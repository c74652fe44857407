// Q4_0 by whole blocks for quant_gemv.wgsl (one lane a block; x staged, quant_gemv_core.wgsl): an 18-byte block
// spans 5 words, from a word boundary (even block: d | quants 0-1, ..., quants 14-15 | the next block's d) or
// from mid-word (odd: its d is the upper half of the first word, its quants the next 4 words). A lane loads the
// 5 (against 12 loads per 32 weights in quant_lanes_q4_0.wgsl, where 4 lanes share a block and each loads the
// word holding d and the two its quant word spans) and realigns an even block's quant words with one funnel
// shift each. Sums by chains of fma. One row of x: the weights are dequantized in unit_dot, per row.
const_assert LPB == 1u;
//!include quant_x_contiguous.wgsl
const WORDS: u32 = 5u;

//!include quant_x_plain.wgsl
//!include quant_fma_dot.wgsl
//!include quant_units_whole.wgsl

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  var lo = 0.0;
  var hi = 0.0;
  //!repeat I 4
  let q$I = quant_word(v.w[$I], v.w[$I + 1], v.odd);
  lo = fma_dot(nibbles_low(q$I, 8.0), xs[$I], lo);
  hi = fma_dot(nibbles_high(q$I, 8.0), xs[$I + 4], hi);
  //!end
  return block_d(v.w[0], v.odd) * (lo + hi);
}
