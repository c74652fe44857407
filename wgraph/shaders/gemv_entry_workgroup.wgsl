// The GEMV's entry point without subgroups: every sum goes through workgroup memory.
@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  gemv(lid, wid.x + wid.y * groups.x, 1u);
}

fn shuffle_xor(v: f32, mask: u32) -> f32 {
  return v;  // never called: the shuffle width is 1
}
