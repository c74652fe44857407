// Q4_K by integer dots (a tuning candidate): the super-blocks and the lanes as quant_lanes_q4_k.wgsl (lane t of a
// block's 8 takes quant words t, t + 8, t + 16, t + 24: weights 4t .. 4t + 3 of sub-blocks 2c in their low
// nibbles, of 2c + 1 in their high), x rounded to int8 per sub-block as it is staged (quant_x_i8_staged_k.wgsl).
// A weight is d * sc_i * q - dmin * mn_i: the lane's sum is sum_i d * sc_i * step_i * dot(q_i, xq_i) over its 8
// sub-blocks (8 dot4I8Packed, each made a float exactly by two adds), minus dmin * mn_t * (the sum of x' over
// sub-block t): each lane takes one sub-block's min.
const_assert LPB == 8u && XV == 8u;
//!include quant_x_i8_staged_k.wgsl

//!include quant_units_q4_k.wgsl

struct Values {
  even: vec4<u32>,     // the quants of sub-blocks 0, 2, 4, 6: the low nibbles of the lane's 4 quant words
  odd: vec4<u32>,      // of 1, 3, 5, 7: their high nibbles
  sc_even: vec4<f32>,  // d * sc of those sub-blocks
  sc_odd: vec4<f32>,
  mn: f32,             // dmin * mn of sub-block t
}

fn unit_values(u: Unit) -> Values {
  // scale bytes as quant_k_values.wgsl reads them: sc 0-3 in the low 6 bits of bytes 0-3 (s0), sc 4-7 in the low
  // nibbles of bytes 8-11 (s2) with their top 2 bits in the top of bytes 0-3
  let s0 = u.head.y;
  let s2 = u.head.w;
  let sc_lo = bytes_unsigned(s0 & 0x3F3F3F3Fu, 0.0);
  let sc_hi = bytes_unsigned((s2 & 0x0F0F0F0Fu) | ((s0 >> 2u) & 0x30303030u), 0.0);
  let dm = unpack2x16float(u.head.x);
  return Values(u.q & vec4<u32>(0x0F0F0F0Fu), (u.q >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu),
                dm.x * vec4<f32>(sc_lo.x, sc_lo.z, sc_hi.x, sc_hi.z), dm.x * vec4<f32>(sc_lo.y, sc_lo.w, sc_hi.y, sc_hi.w),
                dm.y * f32(scale_min_k4(s0, u.head.z, s2, u.t).y));
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  let d_even = vec4<i32>(dot4I8Packed(v.even.x, xp.even.x), dot4I8Packed(v.even.y, xp.even.y),
                         dot4I8Packed(v.even.z, xp.even.z), dot4I8Packed(v.even.w, xp.even.w));
  let d_odd = vec4<i32>(dot4I8Packed(v.odd.x, xp.odd.x), dot4I8Packed(v.odd.y, xp.odd.y),
                        dot4I8Packed(v.odd.z, xp.odd.z), dot4I8Packed(v.odd.w, xp.odd.w));
  return dot(v.sc_even * xp.st_even, exact_f32(d_even)) + dot(v.sc_odd * xp.st_odd, exact_f32(d_odd)) - v.mn * xp.own;
}
