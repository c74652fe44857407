// Q6_K by integer dots (a tuning candidate): the super-blocks and the lanes as quant_lanes_q6_k.wgsl (lane t of a
// block's 8 takes weights 4t .. 4t + 3 of every sub-block of 32: value vector i against x word t of sub-block i),
// x rounded to int8 per sub-block of 32 as it is staged (quant_x_i8_staged_k.wgsl). A weight is d * scale * (q - 32),
// a lane's 4 weights of a sub-block under one scale: its sum per row of W is sum_i d * scale_i * step_i *
// dot(q_i - 32, xq_i) (quant_i8_k_dot.wgsl), the 6-bit quants made signed bytes.
const_assert LPB == 8u && XV == 8u;
//!include quant_x_i8_staged_k.wgsl

//!include quant_units_q6_k.wgsl
//!include quant_i8_k_dot.wgsl

struct Values {
  even: vec4<u32>,     // q - 32 of value vectors 0, 2, 4, 6 as int8, 4 a word
  odd: vec4<u32>,      // of 1, 3, 5, 7
  sc_even: vec4<f32>,  // d * scale of those value vectors
  sc_odd: vec4<f32>,
}

// A word of 6-bit quants (0..63) minus 32 as int8: flipping bit 5 makes each q - 32 (mod 64), and a set bit 5
// is then the sign, copied to bits 6 and 7
fn q6_i8(q: u32) -> u32 {
  let w = q ^ 0x20202020u;
  return w | ((w & 0x20202020u) * 6u);
}

fn unit_values(u: Unit) -> Values {
  let q = q6_words(u);
  let sc = q6_scales(u);
  let d = unpack2x16float(u.tail[4]).x;
  return Values(vec4<u32>(q6_i8(q[0]), q6_i8(q[2]), q6_i8(q[4]), q6_i8(q[6])),
                vec4<u32>(q6_i8(q[1]), q6_i8(q[3]), q6_i8(q[5]), q6_i8(q[7])),
                d * vec4<f32>(sc[0].x, sc[0].z, sc[1].x, sc[1].z), d * vec4<f32>(sc[0].y, sc[0].w, sc[1].y, sc[1].w));
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return k_i8_dot(v.even, v.odd, v.sc_even, v.sc_odd, xp);
}
