// A lane's share of one block for the formats of an f16 d then quant words, 18 (Q4_0) or 34 (Q8_0) bytes: the
// quant word t the lane takes and the block's d (quant_lanes_q4_0/q8_0.wgsl read it so).
// An even block starts on a word (its quants then start mid-word), an odd one mid-word.

struct Unit {
  q: u32,
  d: f32,
}

// Block b (counted over the whole matrix) for lane t.
fn load_unit(b: u32, t: u32) -> Unit {
  let w = b * BLOCK_BYTES / 4u;
  let odd = (b & 1u) != 0u;
  let head = word(w);
  return Unit(quant_word(word(w + t), word(w + t + 1u), odd), block_d(head, odd));
}
