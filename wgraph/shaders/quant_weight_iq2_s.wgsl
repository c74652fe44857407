// One IQ2_S weight (the embedding gather): weight j of super-block b, in sub-block s = j / 32, group l = j % 32 / 8:
// its grid index (byte 2 + 4s + l, 2 more bits from byte 66 + s), the entry's byte j % 8, its sign bit j % 8 of
// byte 34 + 4s + l, the scale nibble l / 2 of byte 74 + s; d * (0.5 + scale) / 4 * magnitude * sign.
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let s = j / 32u;
  let l = j % 32u / 8u;
  let index = byte_at(byte + 2u + 4u * s + l) | (((byte_at(byte + 66u + s) >> (2u * l)) & 3u) << 8u);
  let magnitude = (table_word(index * 2u + j % 8u / 4u) >> (8u * (j % 4u))) & 255u;
  let scale = (byte_at(byte + 74u + s) >> (4u * (l / 2u))) & 15u;
  let sign = signs4(byte_at(byte + 34u + 4u * s + l), 4u * (j % 8u / 4u))[j % 4u];
  return half_at(byte) * (0.5 + f32(scale)) * 0.25 * f32(magnitude) * sign;
}
