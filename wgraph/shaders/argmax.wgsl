// out[row] = the index of the largest value of x's row (u32). A workgroup scans one chunk of a row (chunk_len
// values; a row of one chunk is one workgroup): each thread a strided slice in index order, then a tree reduction
// of (value, index) pairs. With one chunk per row it writes out[row]; with several, its chunk's pair goes to
// `parts` and argmax_merge.wgsl reduces a row's pairs (a 128256-wide vocabulary row then spreads over ~126
// workgroups instead of one SM). Ties go to the lowest index and a NaN beats every number (the first NaN
// wins), as numpy.argmax.
{{ENABLE}}
//!include is_nan.wgsl
//!include sampling_common.wgsl

struct ArgmaxParams {
  rows: u32,
  dim: u32,
  chunk_len: u32,
  chunks: u32,  // per row; > 1: pairs into parts
}

@group(0) @binding(0) var<uniform> params: ArgmaxParams;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<storage, read_write> parts: array<u32>;  // [rows, chunks, (value bits, index)]

var<workgroup> best_v: array<f32, {{WORKGROUP_SIZE_X}}>;
var<workgroup> best_i: array<u32, {{WORKGROUP_SIZE_X}}>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let flat = wid.x + wid.y * groups.x;
  let row = flat / params.chunks;
  let chunk = flat % params.chunks;
  if (row >= params.rows) {
    return;
  }
  let base = row * params.dim;
  let start = chunk * params.chunk_len;
  let end = min(params.dim, start + params.chunk_len);
  var v = 0.0;
  var vi = NO_INDEX;
  for (var i = start + lid.x; i < end; i = i + {{WORKGROUP_SIZE_X}}u) {
    let c = f32(x[base + i]);
    if (beats(c, i, v, vi)) {
      v = c;
      vi = i;
    }
  }
//!include argmax_reduce.wgsl
  if (lid.x == 0u) {
    if (params.chunks == 1u) {
      out[row] = best_i[0];
    } else {
      parts[2u * flat] = bitcast<u32>(best_v[0]);
      parts[2u * flat + 1u] = best_i[0];
    }
  }
}
