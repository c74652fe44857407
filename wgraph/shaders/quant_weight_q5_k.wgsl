// One Q5_K weight (the embedding gather): weight j of super-block b, as Q4_K's (quant byte 48 + 32c + j % 32, its
// low or high nibble) with bit j / 32 of qh byte j % 32 as its fifth bit; d * sc * q - dmin * mn.
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let c = j / 64u;
  let high = j % 64u >= 32u;
  let q = byte_at(byte + 48u + 32u * c + j % 32u);
  let top = (byte_at(byte + 16u + j % 32u) >> (j / 32u)) & 1u;
  let head = byte / 4u;
  let sm = scale_min_k4(blocks[head + 1u], blocks[head + 2u], blocks[head + 3u], j / 32u);
  let dm = unpack2x16float(blocks[head]);
  return dm.x * f32(sm.x) * f32(select(q & 15u, q >> 4u, high) | (top << 4u)) - dm.y * f32(sm.y);
}
