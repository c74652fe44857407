// One IQ3_S weight (the embedding gather): weight j of super-block b, in sub-block s = j / 32, group g = j % 32 / 4:
// its grid index (byte 2 + 8s + g, the 9th bit g of byte 66 + s), the entry's byte j % 4, sign bit j % 8 of byte
// 74 + j / 8, the scale nibble s % 2 of byte 106 + s / 2; d * (1 + 2 scale) * magnitude * sign.
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let s = j / 32u;
  let g = j % 32u / 4u;
  let index = byte_at(byte + 2u + 8u * s + g) | (((byte_at(byte + 66u + s) >> g) & 1u) << 8u);
  let magnitude = (table_word(index) >> (8u * (j % 4u))) & 255u;
  let scale = (byte_at(byte + 106u + s / 2u) >> (4u * (s % 2u))) & 15u;
  let sign = signs4(byte_at(byte + 74u + j / 8u), 4u * (j % 8u / 4u))[j % 4u];
  return half_at(byte) * (1.0 + 2.0 * f32(scale)) * f32(magnitude) * sign;
}
