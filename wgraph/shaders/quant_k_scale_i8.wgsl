// The integer-dot values of a lane of a super-block whose weights are d * scale * q with one signed scale a
// sub-block of 16 (Q3_K, Q6_K: quant_lanes_q3_k_i8.wgsl, quant_lanes_q6_k_i8.wgsl; a lane's 4 weights of a
// sub-block of 32 share one) and its sum (quant_i8_k_dot.wgsl).
//!include quant_i8_k_dot.wgsl

struct Values {
  even: vec4<u32>,     // the int8 quants of value vectors 0, 2, 4, 6, 4 a word
  odd: vec4<u32>,      // of 1, 3, 5, 7
  sc_even: vec4<f32>,  // d * scale of those value vectors
  sc_odd: vec4<f32>,
}

// The bytes of `q`, each a field of b bits holding value + 2^(b - 1) (`half`: 2^(b - 1); Q3_K's 3-bit quants minus 4,
// Q6_K's 6-bit ones minus 32), as int8 values: flipping the field's top bit makes each the value mod 2^b, and that
// bit is then its sign, copied to the byte's bits above (half * (256 / half - 2): bits b .. 7)
fn centered_i8(q: u32, half: u32) -> u32 {
  let w = q ^ (half * 0x01010101u);
  return w | ((w & (half * 0x01010101u)) * (256u / half - 2u));
}

// Value vector i's quants, stored as q + offset in the bytes of word q[i] (made int8 here), under sc[i / 4][i % 4]
// (the lane's scales) and d (Q3_K: offset 4, Q6_K: 32)
fn k_scale_values(stored: array<u32, 8>, offset: u32, sc: array<vec4<f32>, 2>, d: f32) -> Values {
  var q: array<u32, 8>;
  //!repeat I 8
  q[$I] = centered_i8(stored[$I], offset);
  //!end
  return Values(vec4<u32>(q[0], q[2], q[4], q[6]), vec4<u32>(q[1], q[3], q[5], q[7]),
                d * vec4<f32>(sc[0].x, sc[0].z, sc[1].x, sc[1].z), d * vec4<f32>(sc[0].y, sc[0].w, sc[1].y, sc[1].w));
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return k_i8_dot(v.even, v.odd, v.sc_even, v.sc_odd, xp);
}
