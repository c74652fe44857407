// f16 weights for the GEMM, read 8 bytes (4 weights) at a time as u32 words and widened with
// unpack2x16float (k % 4 == 0; no shader-f16 needed)
@group(0) @binding(2) var<storage, read> w: array<vec2<u32>>;

// w[row, k..k+3] (k a multiple of 4) as its two u32 words, in flight until ready_w (as load_x: the address
// clamped from k_end on, the value dropped there; unpacked here, the unpack would wait for the load)
fn load_w(row: u32, k: u32, k_end: u32) -> vec2<u32> {
  return w[(row * params.k + select(0u, k, k < k_end)) / 4u];
}

// load_w's words for k as 4 f32 weights, when the slice is staged: zeros from k_end on
fn ready_w(v: vec2<u32>, k: u32, k_end: u32) -> vec4<f32> {
  return select(vec4<f32>(0.0), vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)), k < k_end);
}
