// f16 weights for the GEMM, read element by element (any k) from u32 words: element e is the low half of
// word e / 2 when e is even (no shader-f16 needed)
@group(0) @binding(2) var<storage, read> w: array<u32>;

// w[row, k..k+3] as f32, zeros from k_end on
fn load_w(row: u32, k: u32, k_end: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  //!repeat C 4
  if (k + ${C}u < k_end) {
    let e = row * params.k + k + ${C}u;
    v[$C] = unpack2x16float(w[e / 2u])[e % 2u];
  }
  //!end
  return v;
}

// load_w's value, when the slice is staged (already zero from k_end on)
fn ready_w(v: vec4<f32>, k: u32, k_end: u32) -> vec4<f32> {
  return v;
}
