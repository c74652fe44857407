// A lane's share of one Q5_K super-block (176 bytes, on 16): the 16-byte header (as Q4_K's), qh word t (the
// fifth bits of weights 4t .. 4t + 3 of every sub-block: bit j of a byte for sub-block j) and quant words
// t + 8c, c = 0..3 (the 4 low bits, laid out as Q4_K's) (quant_lanes_q5_k.wgsl).

struct Unit {
  q: vec4<u32>,     // quant words t + 8c, c = 0..3
  h: u32,           // qh word t
  head: vec4<u32>,  // d | dmin, then the scale bytes 0-3, 4-7, 8-11
  t: u32,           // the lane's place in the block (quant_lanes_q5_k_i8.wgsl's min is its sub-block t's)
}

fn load_unit(b: u32, t: u32) -> Unit {
  let a = b * (BLOCK_BYTES / 4u);  // the header is words 0-3, qh words 4-11, the quants from word 12
  let w = a + 12u + t;
  return Unit(vec4<u32>(word(w), word(w + 8u), word(w + 16u), word(w + 24u)), word(a + 4u + t),
              word4(b * (BLOCK_BYTES / 16u)), t);
}
