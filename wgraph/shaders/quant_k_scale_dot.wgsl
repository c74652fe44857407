// The values of a lane's K-quant super-block whose weights are d * scale * q with one signed scale a sub-block
// of 16 (Q3_K, Q6_K: quant_lanes_q3_k.wgsl, quant_lanes_q6_k.wgsl): value vector i (q of the lane's 4 weights of
// half i / 4's sub-block) multiplies x vector i of the lane and sc[i / 4][i % 4], its scale.

struct Values {
  v: array<vec4<f32>, 8>,   // q of the lane's x vectors i = 4n + m
  sc: array<vec4<f32>, 2>,  // their scales, m = 0..3, per half n
  d: f32,
}

// Value vector i's quants, stored as q + offset in the bytes of word q[i], under sc[i / 4][i % 4] (the lane's
// scales) and d (Q3_K: offset 4, Q6_K: 32)
fn k_scale_values(q: array<u32, 8>, offset: u32, sc: array<vec4<f32>, 2>, d: f32) -> Values {
  var v: array<vec4<f32>, 8>;
  //!repeat I 8
  v[$I] = bytes_unsigned(q[$I], f32(offset));
  //!end
  return Values(v, sc, d);
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  let p0 = vec4<f32>(dot(v.v[0], xs[0]), dot(v.v[1], xs[1]), dot(v.v[2], xs[2]), dot(v.v[3], xs[3]));
  let p1 = vec4<f32>(dot(v.v[4], xs[4]), dot(v.v[5], xs[5]), dot(v.v[6], xs[6]), dot(v.v[7], xs[7]));
  return v.d * (dot(v.sc[0], p0) + dot(v.sc[1], p1));
}
