// Q4_0 lanes by integer dot products (a tuning candidate): the blocks and the lanes as quant_lanes_q4_0.wgsl,
// but a lane's 8 values of x are rounded to int8 on a scale of their own (max |x| / 127; llama.cpp rounds x to
// int8 per 32) once for the FT rows, and each row's 8 weights take two dot4I8Packed (4 products and their sum
// per instruction, where the device has one) instead of 8 dequantized f32 values and 8 FMAs:
// sum d * (q - 8) * x = d * step * (dot(q, xq) - 8 * sum(xq)). The rounding makes it ~1e-3 off the float sum.
const_assert LPB == 4u;
//!include quant_x_interleaved.wgsl

//!include quant_i8_x.wgsl

//!include quant_units_d_words.wgsl

struct Values {
  q: vec2<u32>,  // the low nibbles, the high nibbles, as 4 bytes each (0..15)
  d: f32,
}

fn unit_values(u: Unit) -> Values {
  return Values(vec2<u32>(u.q & 0x0F0F0F0Fu, (u.q >> 4u) & 0x0F0F0F0Fu), u.d);
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  let s = dot4I8Packed(v.q.x, xp.q[0]) + dot4I8Packed(v.q.y, xp.q[1]) - 8 * (xp.sums[0] + xp.sums[1]);
  return v.d * xp.step * f32(s);
}
