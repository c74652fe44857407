// The 4 bytes from byte `at` (even) of the blocks buffer: one word, or the funnel of the two it spans (the
// readers of blocks that may start 2 bytes into a word: Q3_K, Q6_K)
fn bytes4(at: u32) -> u32 {
  let w = at / 4u;
  let lo = word(w);
  let hi = word(w + 1u);
  return select(lo, funnel16(lo, hi), at % 4u != 0u);
}
