// One Q4_K weight (the embedding gather): weight j of super-block b. Chunk c = j / 64 holds sub-blocks 2c
// (low nibbles of quant bytes 32c..32c+31) and 2c + 1 (their high nibbles); d * sc * q - dmin * mn.
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let c = j / 64u;
  let high = j % 64u >= 32u;
  let q = byte_at(byte + 16u + 32u * c + j % 32u);
  let head = byte / 4u;
  let sm = scale_min_k4(blocks[head + 1u], blocks[head + 2u], blocks[head + 3u], 2u * c + select(0u, 1u, high));
  let dm = unpack2x16float(blocks[head]);
  return dm.x * f32(sm.x) * f32(select(q & 15u, q >> 4u, high)) - dm.y * f32(sm.y);
}
