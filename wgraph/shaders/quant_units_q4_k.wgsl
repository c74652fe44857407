// A lane's share of one Q4_K super-block (144 bytes, on 16): quant words t + 8c, c = 0..3, and the 16-byte
// header (quant_lanes_q4_k.wgsl).

struct Unit {
  q: vec4<u32>,     // quant words t + 8c, c = 0..3
  head: vec4<u32>,  // d | dmin, then the scale bytes 0-3, 4-7, 8-11
  t: u32,           // the lane's place in the block (quant_lanes_q4_k_i8.wgsl's min is its sub-block t's)
}

fn load_unit(b: u32, t: u32) -> Unit {
  let w = b * (BLOCK_BYTES / 4u) + 4u + t;
  return Unit(vec4<u32>(word(w), word(w + 8u), word(w + 16u), word(w + 24u)), word4(b * (BLOCK_BYTES / 16u)), t);
}
