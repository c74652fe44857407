// Q8_0 by whole blocks for quant_gemv.wgsl (one lane a block; x staged, quant_gemv_core.wgsl): a 34-byte block
// spans 9 words, from a word boundary (even block: d | quants 0-1, ..., quants 30-31 | the next block's d) or
// from mid-word (odd: its d is the upper half of the first word, its quants the next 8 words). A lane loads the
// 9 (against 3 loads per 4 weights in quant_lanes_q8_0.wgsl, where 8 lanes share a block) and realigns an even
// block's quant words with one funnel shift each. Sums by chains of fma. The quants as values: per row in unit_dot
// (one row of x) or once a block (several; quant_units_whole.wgsl).
const_assert LPB == 1u;
//!include quant_x_contiguous.wgsl
const WORDS: u32 = 9u;

//!include quant_x_plain.wgsl
//!include fma_dot.wgsl
//!include quant_units_whole.wgsl
//!include quant_values_once.wgsl

// Weights 4i .. 4i + 3 of the block (quant word i's bytes)
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  var q: array<vec4<f32>, 8>;
  //!repeat I 8
  q[$I] = bytes_signed(quant_word(u.w[$I], u.w[$I + 1], u.odd));
  //!end
  return q;
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  var q = v.q;
  if (MAX_ROWS == 1u) {
    q = quant_values(v.u);
  }
  var a = 0.0;  // two chains: the even quant words', the odd ones'
  var b = 0.0;
  //!repeat I 4
  a = fma_dot(q[2 * $I], xs[2 * $I], a);
  b = fma_dot(q[2 * $I + 1], xs[2 * $I + 1], b);
  //!end
  return block_d(v.u.w[0], v.u.odd) * (a + b);
}
