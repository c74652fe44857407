// Q8_0 with one lane a whole block (LPB 1; a candidate reader, registry/quant.toml quant_gemv_r1_whole): the
// lane's 8 quant words (quant_units_whole_d_words.wgsl), word j giving weights 4j..4j+3 (x vector j), each d * q.
// Against the planned reader (8 lanes a block, each one quant word and the word holding d): d and its parity
// once per 32 weights instead of once per 4, and 9 word loads per 32 weights instead of 24.
const_assert XV == 8u;

// No per-row part of x: the dot uses x as it is.
alias XPart = f32;

fn x_part(xs: array<vec4<f32>, XV>) -> XPart {
  return 0.0;
}

//!include quant_units_whole_d_words.wgsl

struct Values {
  v: array<vec4<f32>, 8>,  // q for x vectors 0..7
  d: f32,
}

fn unit_values(u: Unit) -> Values {
  return Values(array<vec4<f32>, 8>(bytes_signed(u.q[0]), bytes_signed(u.q[1]), bytes_signed(u.q[2]),
                                    bytes_signed(u.q[3]), bytes_signed(u.q[4]), bytes_signed(u.q[5]),
                                    bytes_signed(u.q[6]), bytes_signed(u.q[7])), u.d);
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  let even = dot(v.v[0], xs[0]) + dot(v.v[2], xs[2]) + dot(v.v[4], xs[4]) + dot(v.v[6], xs[6]);
  let odd = dot(v.v[1], xs[1]) + dot(v.v[3], xs[3]) + dot(v.v[5], xs[5]) + dot(v.v[7], xs[7]);
  return v.d * (even + odd);
}
