// One Q4_0 weight (the embedding gather): weight j of block b, d * (q - 8).
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let q = byte_at(byte + 2u + j % 16u);
  return half_at(byte) * (f32(select(q & 15u, q >> 4u, j >= 16u)) - 8.0);
}
