// W's words for quant_gemv.wgsl's block readers: loads from the blocks buffer (every planned GEMV).
fn word(i: u32) -> u32 {
  return blocks[i];
}

fn word4(i: u32) -> vec4<u32> {
  return heads[i];
}
