// One IQ1_S weight (the embedding gather): weight j of super-block b, in sub-block s = j / 32, group l = j % 32 / 8:
// its grid index (byte 2 + 4s + l, 3 more bits from the sub-block's u16 at byte 34 + 2s), the entry's int8 j % 8,
// the u16's scale and delta sign; d * (2 scale + 1) * (value + delta).
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let s = j / 32u;
  let l = j % 32u / 8u;
  let qh = u16_at(byte + 34u + 2u * s);
  let index = byte_at(byte + 2u + 4u * s + l) | (((qh >> (3u * l)) & 7u) << 8u);
  let value = f32((bitcast<i32>(table_word(index * 2u + j % 8u / 4u) << (24u - 8u * (j % 4u)))) >> 24u);
  let delta = select(0.125, -0.125, (qh & 0x8000u) != 0u);
  return half_at(byte) * f32(2u * ((qh >> 12u) & 7u) + 1u) * (value + delta);
}
