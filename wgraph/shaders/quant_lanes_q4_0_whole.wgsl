// Q4_0 by whole blocks for quant_gemv.wgsl (one lane a block; x staged, quant_gemv_core.wgsl): an 18-byte block
// spans 5 words, from a word boundary (even block: d | quants 0-1, ..., quants 14-15 | the next block's d) or
// from mid-word (odd: its d is the upper half of the first word, its quants the next 4 words). A lane loads the
// 5 (against 12 loads per 32 weights in quant_lanes_q4_0.wgsl, where 4 lanes share a block and each loads the
// word holding d and the two its quant word spans) and realigns an even block's quant words with one funnel
// shift each. Sums by chains of fma. The quants as values: per row in unit_dot (one row of x) or once a block
// (several; quant_units_whole.wgsl).
const_assert LPB == 1u;
//!include quant_x_contiguous.wgsl
const WORDS: u32 = 5u;

//!include quant_x_plain.wgsl
//!include fma_dot.wgsl
//!include quant_units_whole.wgsl
//!include quant_values_once.wgsl

// Weights 4i .. 4i + 3 of the block minus 8 (i < 4: low nibbles of quant word i; i >= 4: high nibbles of i - 4)
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  var q: array<vec4<f32>, 8>;
  //!repeat I 4
  let w$I = quant_word(u.w[$I], u.w[$I + 1], u.odd);
  q[$I] = nibbles_low(w$I, 8.0);
  q[$I + 4] = nibbles_high(w$I, 8.0);
  //!end
  return q;
}

//!include quant_whole_d_dot.wgsl
