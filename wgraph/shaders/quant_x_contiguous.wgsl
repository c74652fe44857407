// The x layout of the readers whose lane takes a run of XV vectors of its block (whole blocks;
// quant_x_f32.wgsl's lane_x): x staged. Lane u of a step reads its vector i at u * XV + (i ^ (u % 8)), so the
// 8 lanes of a quarter warp's 16-byte reads hit the 8 bank groups.
const STAGE_X: u32 = 1u;
const_assert XV % 8u == 0u;  // the XOR keeps a lane's vectors in its own run

fn lane_vector(t: u32, i: u32) -> u32 {
  return t * XV + i;
}

fn stage_at(v: u32) -> u32 {
  return v ^ ((v / XV) % 8u);
}

//!include quant_x_f32.wgsl
