// One IQ2_XS weight (the embedding gather): weight j of super-block b, in sub-block s = j / 32, group l = j % 32 / 8:
// the group's u16 (a 9-bit grid index, a 7-bit sign code), its entry's byte j % 8, the scale nibble l / 2 of byte
// 66 + s; d * (0.5 + scale) / 4 * magnitude * sign.
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let s = j / 32u;
  let l = j % 32u / 8u;
  let g = u16_at(byte + 2u + 8u * s + 2u * l);
  let magnitude = (table_word((g & 511u) * 2u + j % 8u / 4u) >> (8u * (j % 4u))) & 255u;
  let scale = (byte_at(byte + 66u + s) >> (4u * (l / 2u))) & 15u;
  return half_at(byte) * (0.5 + f32(scale)) * 0.25 * f32(magnitude) * iq_signs(g >> 9u, j % 8u / 4u)[j % 4u];
}
