// One IQ2_XXS weight (the embedding gather): weight j of super-block b, in sub-block s = j / 32, group l = j % 32 / 8
// of 8: grid entry (byte l of the sub-block's first word) at its byte j % 8, signed by code l, times d * (0.5 +
// the scale) / 4.
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES + 2u + 8u * (j / 32u);
  let l = j % 32u / 8u;
  let entry = byte_at(byte + l);
  let signs = u32_at(byte + 4u);
  let magnitude = (table_word(entry * 2u + j % 8u / 4u) >> (8u * (j % 4u))) & 255u;
  let sign = iq_signs((signs >> (7u * l)) & 127u, j % 8u / 4u)[j % 4u];
  return half_at(b * BLOCK_BYTES) * (0.5 + f32(signs >> 28u)) * 0.25 * f32(magnitude) * sign;
}
