// The GEMV's entry point on devices with subgroups: threads are numbered along subgroups (a slot's lanes are
// neighbours in one subgroup, whatever order the device numbers subgroups) and the lanes of one subgroup sum
// by shuffles. A subgroup narrower than SG_FLOOR lanes takes the workgroup-memory sum (gemv.wgsl).
@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_size) sg_size: u32,
        @builtin(subgroup_invocation_id) sg_lane: u32) {
  gemv(sg * sg_size + sg_lane, wid.x + wid.y * groups.x, select(1u, min(LANES, sg_size), sg_size >= SG_FLOOR));
}

fn shuffle_xor(v: f32, mask: u32) -> f32 {
  return subgroupShuffleXor(v, mask);
}
