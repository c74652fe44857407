// One Q4_1 weight (the embedding gather): weight j of block b, d * q + m.
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let q = byte_at(byte + 4u + j % 16u);
  return half_at(byte) * f32(select(q & 15u, q >> 4u, j >= 16u)) + half_at(byte + 2u);
}
