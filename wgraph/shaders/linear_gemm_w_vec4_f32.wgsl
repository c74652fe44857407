// f32 weights for the GEMM, read 16 bytes at a time (k % 4 == 0)
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;

// w[row, k..k+3] (k a multiple of 4) as loaded, in flight until ready_w (as load_x: the address clamped from k_end
// on, the value dropped there)
fn load_w(row: u32, k: u32, k_end: u32) -> vec4<f32> {
  return w[(row * params.k + select(0u, k, k < k_end)) / 4u];
}

// load_w's value for k, when the slice is staged: zeros from k_end on
fn ready_w(v: vec4<f32>, k: u32, k_end: u32) -> vec4<f32> {
  return select(vec4<f32>(0.0), v, k < k_end);
}
