// The second pass of a chunked argmax (argmax.wgsl): out[row] = the index of the best of the row's chunk pairs
// (value bits, index) in `parts`, by argmax's order (NaN first, larger values, lower indices). One workgroup
// per row.
//!include is_nan.wgsl
//!include sampling_common.wgsl

struct ArgmaxMergeParams {
  rows: u32,
  chunks: u32,
}

@group(0) @binding(0) var<uniform> params: ArgmaxMergeParams;
@group(0) @binding(1) var<storage, read> parts: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

var<workgroup> best_v: array<f32, {{WORKGROUP_SIZE_X}}>;
var<workgroup> best_i: array<u32, {{WORKGROUP_SIZE_X}}>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let row = wid.x + wid.y * groups.x;
  if (row >= params.rows) {
    return;
  }
  var v = 0.0;
  var vi = NO_INDEX;
  for (var c = lid.x; c < params.chunks; c = c + {{WORKGROUP_SIZE_X}}u) {
    let at = 2u * (row * params.chunks + c);
    let w = bitcast<f32>(parts[at]);
    let wi = parts[at + 1u];
    if (beats(w, wi, v, vi)) {
      v = w;
      vi = wi;
    }
  }
//!include argmax_reduce.wgsl
  if (lid.x == 0u) {
    out[row] = best_i[0];
  }
}
