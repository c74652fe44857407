// x for the GEMM, read 16 bytes at a time (k % 4 == 0, so every row of x starts on a vec4)
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;

// x[row, k..k+3] (k a multiple of 4), zeros from k_end on
fn load_x(row: u32, k: u32, k_end: u32) -> vec4<f32> {
  let inside = k < k_end;
  let v = x[(row * params.k + select(0u, k, inside)) / 4u];
  return select(vec4<f32>(0.0), v, inside);
}
