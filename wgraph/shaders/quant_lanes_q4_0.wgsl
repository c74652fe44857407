// Q4_0 lanes for quant_gemv.wgsl: 18-byte blocks (d f16, 16 quant bytes); an even block starts on a word (its
// quants then start mid-word), an odd one mid-word (d is the upper half of a word, its quants start on the
// next). Lane t of a block's 4 takes quant word t: weights 4t..4t+3 in its low nibbles (x vector t) and
// 16+4t..16+4t+3 in its high nibbles (x vector 4 + t), each d * (q - 8). Three word loads per row: the word
// holding d and the two the quant word spans (a neighbour lane's words: the same cache lines).
const_assert LPB == 4u;
//!include quant_x_interleaved.wgsl

//!include quant_x_plain.wgsl

//!include quant_units_d_words.wgsl

struct Values {
  v: array<vec4<f32>, 2>,  // q - 8 of the low nibbles, of the high nibbles
  d: f32,
}

fn unit_values(u: Unit) -> Values {
  return Values(array<vec4<f32>, 2>(nibbles_low(u.q, 8.0), nibbles_high(u.q, 8.0)), u.d);
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return v.d * (dot(v.v[0], xs[0]) + dot(v.v[1], xs[1]));
}
