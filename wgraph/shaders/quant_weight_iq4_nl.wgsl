// One IQ4_NL weight (the embedding gather): weight j of block b: Q4_0's nibble (byte 2 + j % 16, low for j < 16),
// IQ4_NL's table value of it times d.
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let q = (byte_at(byte + 2u + j % 16u) >> (4u * (j / 16u))) & 15u;
  return half_at(byte) * iq4_values(vec4<u32>(q)).x;
}
