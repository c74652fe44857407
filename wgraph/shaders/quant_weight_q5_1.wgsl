// One Q5_1 weight (the embedding gather): weight j of block b, d * q + m: the low or high nibble of quant byte
// j % 16 (bytes 8 ..) with bit j of the 4 qh bytes (bytes 4 .. 7) on top.
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let q = byte_at(byte + 8u + j % 16u);
  let top = (byte_at(byte + 4u + j / 8u) >> (j % 8u)) & 1u;
  return half_at(byte) * f32(select(q & 15u, q >> 4u, j >= 16u) | (top << 4u)) + half_at(byte + 2u);
}
