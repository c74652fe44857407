// x rounded to int8 once for a whole GEMV call (the pre-pass of the x_int8 GEMVs whose registry limit x_rounded is
// 1): one thread per 32-weight block and row of x rounds it as quant_i8_round.wgsl does (the fused norm's weights
// applied, x^2 summed) and writes its three 16-byte vectors: the 8 words of int8 values, then (step, sum of the
// values, x^2, 0). The GEMV stages them as they are (quant_x_i8_staged.wgsl, X_ROUNDED), where the others round x
// again in every workgroup: the lm_head's 2004 workgroups each read and rounded the whole row of x.
struct QuantXRoundParams {
  m: u32,           // rows of x
  k: u32,           // values a row (row_blocks whole blocks)
  row_blocks: u32,  // 32-value blocks a row
}

@group(0) @binding(0) var<uniform> params: QuantXRoundParams;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> xr: array<vec4<f32>>;

override HAS_NORM: bool;

//!include quant_i8_round.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  if (i >= params.m * params.row_blocks) {
    return;
  }
  let row = i / params.row_blocks;
  let b = round_block(row, 0u, 1u, i % params.row_blocks);
  xr[3u * i] = bitcast<vec4<f32>>(vec4<u32>(b.q[0], b.q[1], b.q[2], b.q[3]));
  xr[3u * i + 1u] = bitcast<vec4<f32>>(vec4<u32>(b.q[4], b.q[5], b.q[6], b.q[7]));
  xr[3u * i + 2u] = vec4<f32>(b.step, b.sum, b.sq, 0.0);
}
