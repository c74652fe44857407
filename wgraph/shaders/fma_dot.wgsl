// acc + v . x as a chain of fma: one instruction a weight (dot() is a multiply, three fma, then an add): the
// quantized whole-block readers (quant_lanes_*_whole.wgsl), whose sums run as a few independent chains, and the
// GEMV's walk (gemv_walk.wgsl: the 8-row GEMVs are bound by instruction issue).
fn fma_dot(v: vec4<f32>, x: vec4<f32>, acc: f32) -> f32 {
  return fma(v.w, x.w, fma(v.z, x.z, fma(v.y, x.y, fma(v.x, x.x, acc))));
}
