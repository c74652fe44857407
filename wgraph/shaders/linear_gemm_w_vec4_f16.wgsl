// f16 weights for the GEMM, read 8 bytes (4 weights) at a time as u32 words and widened with
// unpack2x16float (k % 4 == 0; no shader-f16 needed)
@group(0) @binding(2) var<storage, read> w: array<vec2<u32>>;

// w[row, k..k+3] (k a multiple of 4) as f32, zeros from k_end on
fn load_w(row: u32, k: u32, k_end: u32) -> vec4<f32> {
  let inside = k < k_end;
  let v = w[(row * params.k + select(0u, k, inside)) / 4u];
  return select(vec4<f32>(0.0), vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)), inside);
}
