// bfloat16 in u32 words (wgraph/dtypes.py): element i is the low half of word i / 2 when i is even, the high half
// when odd. Widening is exact (a bf16 is the top half of an f32); narrowing rounds to nearest even and keeps NaN.
fn bf16_get(word: u32, i: u32) -> f32 {
  return bitcast<f32>(select(word << 16u, word & 0xFFFF0000u, (i & 1u) == 1u));
}

fn bf16_bits(v: f32) -> u32 {
  let u = bitcast<u32>(v);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    return (u >> 16u) | 0x40u;  // NaN: a quiet NaN of the same sign (rounding could carry it into inf)
  }
  return (u + 0x7FFFu + ((u >> 16u) & 1u)) >> 16u;
}

// The word holding two elements: lo at the even index, hi at the odd one.
fn bf16_pack(lo: f32, hi: f32) -> u32 {
  return bf16_bits(lo) | (bf16_bits(hi) << 16u);
}
