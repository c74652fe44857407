// Q2_K by integer dots (a tuning candidate): the super-blocks and the lanes as quant_lanes_q2_k.wgsl (Q6_K's shape:
// lane t of a block's 8 takes weights 4t .. 4t + 3 of every sub-block of 32), x rounded to int8 per sub-block of 32
// as it is staged (quant_x_i8_staged_k.wgsl). A weight is d * sc * q - dmin * mn with a scale and a min a 16
// weights, so a lane's 4 weights of a sub-block share both: its sum per row of W is
// sum_i step_i * (d * sc_i * dot(q_i, xq_i) - dmin * mn_i * sum(xq_i)) over its 8 value vectors, the sums of
// its own 4 x values each (the stage's XPart).
const_assert LPB == 8u && XV == 8u;
//!include quant_x_i8_staged_k.wgsl

//!include quant_units_q2_k.wgsl
//!include quant_i8_k_dot.wgsl

struct Values {
  even: vec4<u32>,     // the quants (0..3) of value vectors 0, 2, 4, 6 as int8, 4 a word
  odd: vec4<u32>,      // of 1, 3, 5, 7
  sc_even: vec4<f32>,  // d * sc of those value vectors
  sc_odd: vec4<f32>,
  mn_even: vec4<f32>,  // dmin * mn
  mn_odd: vec4<f32>,
}

fn unit_values(u: Unit) -> Values {
  let q = q2_words(u);
  let s = q2_scales(u);
  let dm = unpack2x16float(u.dm);
  return Values(vec4<u32>(q[0], q[2], q[4], q[6]), vec4<u32>(q[1], q[3], q[5], q[7]),
                dm.x * vec4<f32>(s.sc[0].x, s.sc[0].z, s.sc[1].x, s.sc[1].z),
                dm.x * vec4<f32>(s.sc[0].y, s.sc[0].w, s.sc[1].y, s.sc[1].w),
                dm.y * vec4<f32>(s.mn[0].x, s.mn[0].z, s.mn[1].x, s.mn[1].z),
                dm.y * vec4<f32>(s.mn[0].y, s.mn[0].w, s.mn[1].y, s.mn[1].w));
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return k_i8_dot(v.even, v.odd, v.sc_even, v.sc_odd, xp) - dot(v.mn_even, xp.sum_even) - dot(v.mn_odd, xp.sum_odd);
}
