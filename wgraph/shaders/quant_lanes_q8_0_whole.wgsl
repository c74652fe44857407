// Q8_0 by whole blocks for quant_gemv.wgsl (one lane a block; x staged, quant_gemv_core.wgsl): a 34-byte block
// spans 9 words, from a word boundary (even block: d | quants 0-1, ..., quants 30-31 | the next block's d) or
// from mid-word (odd: its d is the upper half of the first word, its quants the next 8 words). A lane loads the
// 9 (against 3 loads per 4 weights in quant_lanes_q8_0.wgsl, where 8 lanes share a block) and realigns an even
// block's quant words with one funnel shift each. Sums by chains of fma. One row of x: dequantized in unit_dot.
const_assert LPB == 1u;
//!include quant_x_contiguous.wgsl
const WORDS: u32 = 9u;

//!include quant_x_plain.wgsl
//!include quant_fma_dot.wgsl
//!include quant_units_whole.wgsl

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  var a = 0.0;  // two chains: the even quant words', the odd ones'
  var b = 0.0;
  //!repeat I 4
  a = fma_dot(bytes_signed(quant_word(v.w[2 * $I], v.w[2 * $I + 1], v.odd)), xs[2 * $I], a);
  b = fma_dot(bytes_signed(quant_word(v.w[2 * $I + 1], v.w[2 * $I + 2], v.odd)), xs[2 * $I + 1], b);
  //!end
  return block_d(v.w[0], v.odd) * (a + b);
}
