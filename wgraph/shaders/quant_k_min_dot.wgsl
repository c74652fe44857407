// The values of a lane's K-quant super-block whose weights are d * sc * q - dmin * mn (Q2_K, Q4_K, Q5_K): value
// vector i (the lane's 4 quants of a sub-block) multiplies x vector i of the lane, sc[i / 4][i % 4] and
// mn[i / 4][i % 4] are that sub-block's scale and min; unit_dot sums them against the lane's x and its sums
// (quant_x_sums.wgsl). The readers fill Values from their blocks (quant_k_values.wgsl for Q4_K's and Q5_K's
// packed header, quant_lanes_q2_k.wgsl).

struct Values {
  v: array<vec4<f32>, 8>,  // q of the lane's sub-block i
  sc: array<vec4<f32>, 2>,  // sc of value vectors 0-3, 4-7
  mn: array<vec4<f32>, 2>,  // mn of value vectors 0-3, 4-7
  dm: vec2<f32>,            // d, dmin
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xsum: XPart) -> f32 {
  let s_lo = vec4<f32>(dot(v.v[0], xs[0]), dot(v.v[1], xs[1]), dot(v.v[2], xs[2]), dot(v.v[3], xs[3]));
  let s_hi = vec4<f32>(dot(v.v[4], xs[4]), dot(v.v[5], xs[5]), dot(v.v[6], xs[6]), dot(v.v[7], xs[7]));
  let x_lo = vec4<f32>(xsum[0], xsum[1], xsum[2], xsum[3]);
  let x_hi = vec4<f32>(xsum[4], xsum[5], xsum[6], xsum[7]);
  return v.dm.x * (dot(v.sc[0], s_lo) + dot(v.sc[1], s_hi)) - v.dm.y * (dot(v.mn[0], x_lo) + dot(v.mn[1], x_hi));
}
