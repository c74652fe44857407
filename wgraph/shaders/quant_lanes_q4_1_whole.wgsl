// Q4_1 with one lane a whole block (LPB 1; a candidate reader, registry/quant.toml quant_gemv_r1_whole): 20-byte
// blocks on a word, so the lane's 5 loads are the (d, m) word and its 4 quant words as they are; word j gives
// weights 4j..4j+3 in its low nibbles (x vector j) and 16+4j..16+4j+3 in its high nibbles (x vector 4 + j), each
// d * q + m: the min multiplies the sum of the block's x. Against the planned reader (4 lanes a block): (d, m)
// once per 32 weights instead of once per 8, 5 word loads per 32 weights instead of 8.
const_assert LPB == 1u && XV == 8u;

//!include quant_x_sums.wgsl

struct Unit {
  q: vec4<u32>,
  dm: vec2<f32>,
}

fn load_unit(b: u32, t: u32) -> Unit {
  let w = b * (BLOCK_BYTES / 4u);
  return Unit(vec4<u32>(word(w + 1u), word(w + 2u), word(w + 3u), word(w + 4u)), unpack2x16float(word(w)));
}

struct Values {
  v: array<vec4<f32>, 8>,  // q for x vectors 0..7
  dm: vec2<f32>,
}

fn unit_values(u: Unit) -> Values {
  return Values(array<vec4<f32>, 8>(nibbles_low(u.q.x, 0.0), nibbles_low(u.q.y, 0.0), nibbles_low(u.q.z, 0.0),
                                    nibbles_low(u.q.w, 0.0), nibbles_high(u.q.x, 0.0), nibbles_high(u.q.y, 0.0),
                                    nibbles_high(u.q.z, 0.0), nibbles_high(u.q.w, 0.0)), u.dm);
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xsum: XPart) -> f32 {
  let even = dot(v.v[0], xs[0]) + dot(v.v[2], xs[2]) + dot(v.v[4], xs[4]) + dot(v.v[6], xs[6]);
  let odd = dot(v.v[1], xs[1]) + dot(v.v[3], xs[3]) + dot(v.v[5], xs[5]) + dot(v.v[7], xs[7]);
  let s = (xsum[0] + xsum[1]) + (xsum[2] + xsum[3]) + ((xsum[4] + xsum[5]) + (xsum[6] + xsum[7]));
  return v.dm.x * (even + odd) + v.dm.y * s;
}
