// Q5_0 by whole blocks for quant_gemv.wgsl (one lane a block; x staged, quant_gemv_core.wgsl): a 22-byte block
// (d f16, qh: the fifth bit of weight j at bit j of 4 bytes, 16 quant bytes: weight i in the low nibble of byte
// i, weight i + 16 in its high one; w = d * (q - 16)) spans 6 words from a word boundary (even block) or from
// mid-word (odd), as Q4_0's do: its fields after d are quant_word's windows (qh is window 0, quant word i window
// i + 1). The fifth bits of 4 neighbouring weights go to bit 4 of 4 bytes by one multiply (quant_common.wgsl's
// spread4). The quants as values: per row in unit_dot (one row of x) or once a block (several;
// quant_units_whole.wgsl).
const_assert LPB == 1u;
//!include quant_x_contiguous.wgsl
const WORDS: u32 = 6u;

//!include quant_x_plain.wgsl
//!include fma_dot.wgsl
//!include quant_units_whole.wgsl
//!include quant_values_once.wgsl

// Weights 4i .. 4i + 3 of the block minus 16 (i < 4: low nibbles of quant word i; i >= 4: high nibbles of i - 4)
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  let qh = quant_word(u.w[0], u.w[1], u.odd);
  var q: array<vec4<f32>, 8>;
  //!repeat I 4
  let w$I = quant_word(u.w[$I + 1], u.w[$I + 2], u.odd);
  q[$I] = bytes_unsigned((w$I & 0x0F0F0F0Fu) | (spread4(qh >> (4u * ${I}u)) << 4u), 16.0);
  q[$I + 4] = bytes_unsigned(((w$I >> 4u) & 0x0F0F0F0Fu) | (spread4(qh >> (16u + 4u * ${I}u)) << 4u), 16.0);
  //!end
  return q;
}

//!include quant_whole_d_dot.wgsl
