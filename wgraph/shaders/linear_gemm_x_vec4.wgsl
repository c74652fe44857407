// x for the GEMM, read 16 bytes at a time (k % 4 == 0, so every row of x starts on a vec4)
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;

// x[row, k..k+3] (k a multiple of 4) as loaded, in flight until ready_x: from k_end on the address is clamped and
// the value is dropped there, not here (an op on the loaded value would wait for the load right after issuing it)
fn load_x(row: u32, k: u32, k_end: u32) -> vec4<f32> {
  return x[(row * params.k + select(0u, k, k < k_end)) / 4u];
}

// load_x's value for k, when the slice is staged: zeros from k_end on
fn ready_x(v: vec4<f32>, k: u32, k_end: u32) -> vec4<f32> {
  return select(vec4<f32>(0.0), v, k < k_end);
}
