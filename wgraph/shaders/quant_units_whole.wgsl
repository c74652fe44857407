// A lane's whole block for the whole-block readers (quant_lanes_<format>_whole.wgsl, which set WORDS): the WORDS
// words from the one holding the block's first byte, loaded together. Q4_0's and Q8_0's blocks (18 and 34 bytes)
// start on a word (an even block) or mid-word (`odd`), and their readers realign the quant words; Q4_1's always
// start on a word. The values: the words themselves and, with several rows of x (MAX_ROWS > 1), the block's 32
// quants as f32 (the reader's quant_values), made once for all the rows; with one row a reader dequantizes the
// words in unit_dot (the same instructions, and no array of 32 values held across the row).

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

struct Values {
  u: Unit,
  q: array<vec4<f32>, 8>,  // MAX_ROWS > 1: quant_values(u)
}

fn unit_values(u: Unit) -> Values {
  var q: array<vec4<f32>, 8>;
  if (MAX_ROWS > 1u) {
    q = quant_values(u);
  }
  return Values(u, q);
}

// The block's quant values (made here with one row of x) against the lane's 8 x vectors, as two fma chains
// (vectors 0-3 and 4-7): what Q4_0's, Q5_0's, Q4_1's and Q5_1's unit_dot scale (quant_whole_d_dot.wgsl,
// quant_whole_dm_dot.wgsl).
fn whole_dots(v: Values, xs: array<vec4<f32>, XV>) -> f32 {
  var q = v.q;
  if (MAX_ROWS == 1u) {
    q = quant_values(v.u);
  }
  var lo = 0.0;
  var hi = 0.0;
  //!repeat I 4
  lo = fma_dot(q[$I], xs[$I], lo);
  hi = fma_dot(q[$I + 4], xs[$I + 4], hi);
  //!end
  return lo + hi;
}
