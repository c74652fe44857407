// One Q6_K weight (the embedding gather): weight j of super-block b. Half n = j / 128 of the block: its 32 ql
// bytes 64n + l hold weights 128n + l (low nibble) and 128n + 64 + l (high), bytes 64n + 32 + l weights
// 128n + 32 + l and 128n + 96 + l; qh byte 32n + l holds the top 2 bits of those four (bits 0-1, 2-3, 4-5, 6-7);
// q - 32 times d and the int8 scale of the weight's 16.
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let n = j / 128u;
  let m = j % 128u / 32u;  // which of the four weights of a qh byte
  let l = j % 32u;
  let low = byte_at(byte + 64u * n + 32u * (m % 2u) + l) >> (4u * (m / 2u));
  let high = byte_at(byte + 128u + 32u * n + l) >> (2u * m);
  let q = f32((low & 15u) | ((high & 3u) << 4u)) - 32.0;
  let scale = f32((i32(byte_at(byte + 192u + j / 16u)) << 24u) >> 24u);  // int8
  return half_at(byte + 208u) * scale * q;
}
