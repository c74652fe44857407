// One Q8_0 weight (the embedding gather): weight j of block b, d * q with q a signed byte.
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let q = bitcast<i32>(byte_at(byte + 2u + j) << 24u) >> 24u;
  return half_at(byte) * f32(q);
}
