// x for the GEMM, read element by element (any k)
@group(0) @binding(1) var<storage, read> x: array<f32>;

// x[row, k..k+3], zeros from k_end on (each element's load is conditional: nothing waits on it here)
fn load_x(row: u32, k: u32, k_end: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  //!repeat C 4
  if (k + ${C}u < k_end) {
    v[$C] = x[row * params.k + k + ${C}u];
  }
  //!end
  return v;
}

// load_x's value, when the slice is staged (already zero from k_end on)
fn ready_x(v: vec4<f32>, k: u32, k_end: u32) -> vec4<f32> {
  return v;
}
