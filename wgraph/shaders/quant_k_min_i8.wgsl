// The integer-dot values of a lane of a super-block whose weights are d * sc_i * q - dmin * mn_i with Q4_K's
// 16-byte header (Q4_K, Q5_K: quant_lanes_q4_k_i8.wgsl, quant_lanes_q5_k_i8.wgsl) and its sum: the lane's int8
// quants of the even and the odd sub-blocks (quant_i8_k_dot.wgsl) minus dmin * mn_t * (the sum of x' over
// sub-block t): each lane of a block's 8 takes one sub-block's min.
//!include quant_i8_k_dot.wgsl

struct Values {
  even: vec4<u32>,     // the quants of sub-blocks 0, 2, 4, 6 as int8 (0..31), 4 a word
  odd: vec4<u32>,      // of 1, 3, 5, 7
  sc_even: vec4<f32>,  // d * sc of those sub-blocks
  sc_odd: vec4<f32>,
  mn: f32,             // dmin * mn of sub-block t
}

// The values of quants `even`, `odd` under `head` (d | dmin, the scale bytes 0-3, 4-7, 8-11) for lane t
fn k_min_values(even: vec4<u32>, odd: vec4<u32>, head: vec4<u32>, t: u32) -> Values {
  // scale bytes as quant_k_values.wgsl reads them: sc 0-3 in the low 6 bits of bytes 0-3 (s0), sc 4-7 in the low
  // nibbles of bytes 8-11 (s2) with their top 2 bits in the top of bytes 0-3
  let s0 = head.y;
  let s2 = head.w;
  let sc_lo = bytes_unsigned(s0 & 0x3F3F3F3Fu, 0.0);
  let sc_hi = bytes_unsigned((s2 & 0x0F0F0F0Fu) | ((s0 >> 2u) & 0x30303030u), 0.0);
  let dm = unpack2x16float(head.x);
  return Values(even, odd, dm.x * vec4<f32>(sc_lo.x, sc_lo.z, sc_hi.x, sc_hi.z),
                dm.x * vec4<f32>(sc_lo.y, sc_lo.w, sc_hi.y, sc_hi.w), dm.y * f32(scale_min_k4(s0, head.z, s2, t).y));
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return k_i8_dot(v.even, v.odd, v.sc_even, v.sc_odd, xp) - v.mn * xp.own;
}
