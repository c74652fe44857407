// One IQ4_XS weight (the embedding gather): weight j of super-block b, in sub-block s = j / 32: the nibble of
// quant byte 8 + 16s + j % 16 (low for j % 32 < 16), IQ4_NL's table value of it, times d * (the 6-bit scale - 32).
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let s = j / 32u;
  let q = (byte_at(byte + 8u + 16u * s + j % 16u) >> (4u * (j % 32u / 16u))) & 15u;
  let scale = ((byte_at(byte + 4u + s / 2u) >> (4u * (s % 2u))) & 15u) | (((byte_at(byte + 2u + s / 4u) >> (2u * (s % 4u))) & 3u) << 4u);
  return half_at(byte) * (f32(scale) - 32.0) * iq4_values(vec4<u32>(q)).x;
}
