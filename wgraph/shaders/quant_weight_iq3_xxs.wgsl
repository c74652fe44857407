// One IQ3_XXS weight (the embedding gather): weight j of super-block b, in sub-block s = j / 32: grid entry (index
// byte j / 4 of the block's 64) at its byte j % 4, signed by the sub-block's code j % 32 / 8 (half j % 8 / 4), times
// d * (0.5 + the scale) / 2.
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let at = byte + 66u + 4u * (j / 32u);
  let signs = u32_at(at);
  let magnitude = (table_word(byte_at(byte + 2u + j / 4u)) >> (8u * (j % 4u))) & 255u;
  let sign = iq_signs((signs >> (7u * (j % 32u / 8u))) & 127u, j % 8u / 4u)[j % 4u];
  return half_at(byte) * (0.5 + f32(signs >> 28u)) * 0.5 * f32(magnitude) * sign;
}
