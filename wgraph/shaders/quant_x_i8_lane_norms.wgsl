// lane_norms of the x sources that round x to int8 as they stage it (quant_x_i8_staged.wgsl,
// quant_x_i8_staged_k.wgsl): the norm is applied as x is rounded (quant_i8_round.wgsl's round_block), so the lanes
// take no norm weights
fn lane_norms(blk: u32, t: u32) -> array<vec4<f32>, XV> {
  return array<vec4<f32>, XV>();
}
