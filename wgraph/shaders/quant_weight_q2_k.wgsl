// One Q2_K weight (the embedding gather): weight j = 128n + 32m + l of super-block b: bits 2m, 2m + 1 of qs
// byte 32n + l (bytes 16 ..); d * sc - dmin * mn of sub-block j / 16 (scale byte j / 16: sc low nibble, mn high).
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let q = (byte_at(byte + 16u + 32u * (j / 128u) + j % 32u) >> (2u * (j % 128u / 32u))) & 3u;
  let s = byte_at(byte + j / 16u);
  return half_at(byte + 80u) * f32(s & 15u) * f32(q) - half_at(byte + 82u) * f32(s >> 4u);
}
