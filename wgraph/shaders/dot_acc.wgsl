// a + dot(u, v) as a chain of four fma(): 4 instructions where `a + dot(u, v)` takes 5 (a multiply, three
// multiply-adds, then the add: the compiler may not move the add into the chain, which reorders the sum). The
// GEMVs' accumulators are many and independent, so the longer chain per accumulator costs no waiting.
fn dot_acc(a: f32, u: vec4<f32>, v: vec4<f32>) -> f32 {
  return fma(u.w, v.w, fma(u.z, v.z, fma(u.y, v.y, fma(u.x, v.x, a))));
}
