// The x layout of the readers whose lanes share a block by interleaving (quant_x_f32.wgsl's lane_x): lane t
// of a block's LPB takes its vectors t, t + LPB, ..: neighbours across the lanes, so x is read from memory.
const STAGE_X: u32 = 0u;

fn lane_vector(t: u32, i: u32) -> u32 {
  return t + LPB * i;
}

fn stage_at(v: u32) -> u32 {
  return v;  // no stage
}

//!include quant_x_f32.wgsl
