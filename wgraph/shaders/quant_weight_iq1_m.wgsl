// One IQ1_M weight (the embedding gather): weight j of super-block b, group g = j / 8: its grid index (byte g, 3 more
// bits from nibble g % 2 of byte 32 + g / 2, whose bit 3 is the delta's sign), the entry's int8 j % 8, the 3-bit
// scale j / 16 (bits 3 (i % 4) of u16 i / 4 at byte 48), d from the 4 u16's top nibbles; d * (2s + 1) * (value +
// delta).
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let g = j / 8u;
  let nib = (byte_at(byte + 32u + g / 2u) >> (4u * (g % 2u))) & 15u;
  let index = byte_at(byte + g) | ((nib & 7u) << 8u);
  let value = f32((bitcast<i32>(table_word(index * 2u + j % 8u / 4u) << (24u - 8u * (j % 4u)))) >> 24u);
  let i = j / 16u;
  let scales = u16_at(byte + 48u + 2u * (i / 4u));
  let d = (byte_at(byte + 49u) >> 4u) | (byte_at(byte + 51u) & 0xF0u) | ((byte_at(byte + 53u) >> 4u) << 8u)
          | ((byte_at(byte + 55u) & 0xF0u) << 8u);
  let delta = select(0.125, -0.125, (nib & 8u) != 0u);
  return unpack2x16float(d).x * f32(2u * ((scales >> (3u * (i % 4u))) & 7u) + 1u) * (value + delta);
}
