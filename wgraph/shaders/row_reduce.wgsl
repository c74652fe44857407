// Workgroup reductions for row kernels (one workgroup per row, {{WORKGROUP_SIZE_X}} threads, a power of two).
// Call from uniform control flow; every thread gets the result. The trailing barrier lets the next call reuse
// the scratch array.

var<workgroup> reduce_f32: array<f32, {{WORKGROUP_SIZE_X}}>;

fn workgroup_sum(lid: u32, v: f32) -> f32 {
  reduce_f32[lid] = v;
  workgroupBarrier();
  for (var s = {{WORKGROUP_SIZE_X}}u / 2u; s > 0u; s = s / 2u) {
    if (lid < s) {
      reduce_f32[lid] = reduce_f32[lid] + reduce_f32[lid + s];
    }
    workgroupBarrier();
  }
  let r = reduce_f32[0];
  workgroupBarrier();
  return r;
}

fn workgroup_max(lid: u32, v: f32) -> f32 {
  reduce_f32[lid] = v;
  workgroupBarrier();
  for (var s = {{WORKGROUP_SIZE_X}}u / 2u; s > 0u; s = s / 2u) {
    if (lid < s) {
      reduce_f32[lid] = max(reduce_f32[lid], reduce_f32[lid + s]);
    }
    workgroupBarrier();
  }
  let r = reduce_f32[0];
  workgroupBarrier();
  return r;
}
