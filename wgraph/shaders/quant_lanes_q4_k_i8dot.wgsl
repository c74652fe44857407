// Q4_K lanes by integer dot products (a tuning candidate): the super-blocks and the lanes as
// quant_lanes_q4_k.wgsl, but x rounded to int8 (quant_i8_x.wgsl) and the whole block's sum in integers: the
// quants of sub-block i against x vector i by dot4I8Packed, times the 6-bit scale sc_i and summed (the mins
// the same with the sums of x), two conversions to float per row and block:
// sum (d * sc_i * q - dmin * mn_i) * x = step * (d * sum_i sc_i * dot(q_i, xq_i) - dmin * sum_i mn_i * sum(xq_i)).
const_assert LPB == 8u && XV == 8u;
//!include quant_x_interleaved.wgsl

//!include quant_i8_x.wgsl

//!include quant_units_q4_k.wgsl

alias Values = Unit;

fn unit_values(u: Unit) -> Values {
  return u;
}

// The 4 bytes of `v` as integers.
fn bytes_i32(v: u32) -> vec4<i32> {
  return bitcast<vec4<i32>>((vec4<u32>(v) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu));
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  let lo = v.q & vec4<u32>(0x0F0F0F0Fu);  // sub-blocks 0, 2, 4, 6
  let hi = (v.q >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);  // sub-blocks 1, 3, 5, 7
  let s_even = vec4<i32>(dot4I8Packed(lo.x, xp.q[0]), dot4I8Packed(lo.y, xp.q[2]), dot4I8Packed(lo.z, xp.q[4]),
                         dot4I8Packed(lo.w, xp.q[6]));
  let s_odd = vec4<i32>(dot4I8Packed(hi.x, xp.q[1]), dot4I8Packed(hi.y, xp.q[3]), dot4I8Packed(hi.z, xp.q[5]),
                        dot4I8Packed(hi.w, xp.q[7]));
  // the 6-bit scales and mins as bytes (quant_lanes_q4_k.wgsl's masks): sub-blocks 0-3, then 4-7
  let s0 = v.head.y;
  let s1 = v.head.z;
  let s2 = v.head.w;
  let sc_lo = bytes_i32(s0 & 0x3F3F3F3Fu);
  let sc_hi = bytes_i32((s2 & 0x0F0F0F0Fu) | ((s0 >> 2u) & 0x30303030u));
  let mn_lo = bytes_i32(s1 & 0x3F3F3F3Fu);
  let mn_hi = bytes_i32(((s2 >> 4u) & 0x0F0F0F0Fu) | ((s1 >> 2u) & 0x30303030u));
  let scaled = dot(vec4<i32>(sc_lo.x, sc_lo.z, sc_hi.x, sc_hi.z), s_even)
             + dot(vec4<i32>(sc_lo.y, sc_lo.w, sc_hi.y, sc_hi.w), s_odd);
  let mins = dot(mn_lo, vec4<i32>(xp.sums[0], xp.sums[1], xp.sums[2], xp.sums[3]))
           + dot(mn_hi, vec4<i32>(xp.sums[4], xp.sums[5], xp.sums[6], xp.sums[7]));
  let dm = unpack2x16float(v.head.x);
  return xp.step * (dm.x * f32(scaled) - dm.y * f32(mins));
}
