// One Q3_K weight (the embedding gather): weight j = 128n + 32m + l of super-block b: its low 2 bits in bits
// 2m, 2m + 1 of qs byte 32n + l (bytes 32 ..), its third bit at bit 4n + m of hmask byte l, q = both - 4;
// times d and sub-block j / 16's 6-bit scale minus 32 (low 4 bits: nibble s / 8 of scale byte s % 8; top 2:
// bits 2 (s / 4) of scale byte 8 + s % 4).
fn weight_at(b: u32, j: u32) -> f32 {
  let byte = b * BLOCK_BYTES;
  let n = j / 128u;
  let m = j % 128u / 32u;
  let l = j % 32u;
  let low = (byte_at(byte + 32u + 32u * n + l) >> (2u * m)) & 3u;
  let third = (byte_at(byte + l) >> (4u * n + m)) & 1u;
  let s = j / 16u;
  let scale = ((byte_at(byte + 96u + s % 8u) >> (4u * (s / 8u))) & 15u)
              | (((byte_at(byte + 104u + s % 4u) >> (2u * (s / 4u))) & 3u) << 4u);
  return half_at(byte + 108u) * (f32(scale) - 32.0) * (f32(low | (third << 2u)) - 4.0);
}
