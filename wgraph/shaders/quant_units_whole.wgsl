// A lane's whole block for the whole-block readers (quant_lanes_<format>_whole.wgsl, which set WORDS): the WORDS
// words from the one holding the block's first byte, loaded together. Q4_0's and Q8_0's blocks (18 and 34 bytes)
// start on a word (an even block) or mid-word (`odd`), and their readers realign the quant words; Q4_1's always
// start on a word. The values: quant_values_once.wgsl (the f32 readers) or the integer-dot readers' own
// (quant_lanes_<format>_whole_i8.wgsl).

struct Unit {
  w: array<u32, WORDS>,
  odd: bool,
}

fn load_unit(b: u32, t: u32) -> Unit {
  let a = b * BLOCK_BYTES / 4u;
  var w: array<u32, WORDS>;
  //!repeat I WORDS
  w[$I] = word(a + ${I}u);
  //!end
  return Unit(w, (b & 1u) != 0u);
}
