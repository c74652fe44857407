// Q5_1 by whole blocks for quant_gemv.wgsl (one lane a block; llama.cpp's fallback inside Q5_K files for rows that
// are not whole 256-weight blocks): a 24-byte block is 6 words on a word boundary, d | m, qh (the fifth bit of
// weight j at bit j), then 16 quant bytes (weight i in the low nibble of byte i, weight i + 16 in its high one);
// w = d * q + m: Q4_1's whole-block reader with the fifth bits put on bit 4 of their bytes (spread4). The quants
// as values: per row in unit_dot (one row of x) or once a block (several; quant_units_whole.wgsl).
const_assert LPB == 1u;
//!include quant_x_contiguous.wgsl
const WORDS: u32 = 6u;

//!include quant_x_sums.wgsl
//!include fma_dot.wgsl
//!include quant_units_whole.wgsl
//!include quant_values_once.wgsl

// Quants 4i .. 4i + 3 of the block (i < 4: low nibbles of quant word i, the block's word i + 2; i >= 4: high)
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  let qh = u.w[1];
  var q: array<vec4<f32>, 8>;
  //!repeat I 4
  q[$I] = bytes_unsigned((u.w[$I + 2] & 0x0F0F0F0Fu) | (spread4(qh >> (4u * ${I}u)) << 4u), 0.0);
  q[$I + 4] = bytes_unsigned(((u.w[$I + 2] >> 4u) & 0x0F0F0F0Fu) | (spread4(qh >> (16u + 4u * ${I}u)) << 4u), 0.0);
  //!end
  return q;
}

//!include quant_whole_dm_dot.wgsl
