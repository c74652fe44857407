// Q4_1 lanes by integer dot products (a tuning candidate): the blocks and the lanes as quant_lanes_q4_1.wgsl,
// but x rounded to int8 (quant_i8_x.wgsl) and each row's 8 weights two dot4I8Packed:
// sum (d * q + m) * x = step * (d * dot(q, xq) + m * sum(xq)).
const_assert LPB == 4u;
//!include quant_x_interleaved.wgsl

//!include quant_i8_x.wgsl

//!include quant_units_q4_1.wgsl

alias Values = Unit;

fn unit_values(u: Unit) -> Values {
  return u;
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  let s = dot4I8Packed(v.q & 0x0F0F0F0Fu, xp.q[0]) + dot4I8Packed((v.q >> 4u) & 0x0F0F0F0Fu, xp.q[1]);
  return xp.step * (v.dm.x * f32(s) + v.dm.y * f32(xp.sums[0] + xp.sums[1]));
}
