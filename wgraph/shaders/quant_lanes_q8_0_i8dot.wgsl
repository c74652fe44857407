// Q8_0 lanes by integer dot products (a tuning candidate): the blocks and the lanes as quant_lanes_q8_0.wgsl,
// but x rounded to int8 (quant_i8_x.wgsl) and each row's 4 weights one dot4I8Packed of the quant word as it is
// stored: sum d * q * x = d * step * dot(q, xq).
const_assert LPB == 8u;

//!include quant_i8_x.wgsl

struct Unit {
  q: u32,
  d: f32,
}

fn load_unit(b: u32, t: u32) -> Unit {
  let w = b * BLOCK_BYTES / 4u;
  let odd = (b & 1u) != 0u;
  let head = word(w);
  return Unit(quant_word(word(w + t), word(w + t + 1u), odd), unpack2x16float(select(head, head >> 16u, odd)).x);
}

alias Values = Unit;

fn unit_values(u: Unit) -> Values {
  return u;
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return v.d * xp.step * f32(dot4I8Packed(v.q, xp.q[0]));
}
