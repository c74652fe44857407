// One Q5_0 weight (the embedding gather): weight j of block b, d * (q - 16): the low or high nibble of quant byte
// j % 16 (bytes 6 ..) with bit j of the 4 qh bytes (bytes 2 .. 5) on top.
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let q = byte_at(byte + 6u + j % 16u);
  let top = (byte_at(byte + 2u + j / 8u) >> (j % 8u)) & 1u;
  return half_at(byte) * (f32(select(q & 15u, q >> 4u, j >= 16u) | (top << 4u)) - 16.0);
}
