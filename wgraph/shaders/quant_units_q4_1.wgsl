// A lane's share of one Q4_1 block (20 bytes, on a word: d and m f16, 16 quant bytes): quant word t and (d, m)
// (quant_lanes_q4_1.wgsl).

struct Unit {
  q: u32,
  dm: vec2<f32>,
}

fn load_unit(b: u32, t: u32) -> Unit {
  let w = b * (BLOCK_BYTES / 4u);
  return Unit(word(w + 1u + t), unpack2x16float(word(w)));
}
