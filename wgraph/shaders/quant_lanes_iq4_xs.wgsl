// IQ4_XS lanes for quant_gemv.wgsl: 136-byte super-blocks of 256 weights, always on a word: d f16, scales_h (u16:
// bits 2j, 2j + 1 the top of sub-block j's 6-bit scale), scales_l (4 bytes: nibble j % 2 of byte j / 2 its low 4
// bits), then 8 sub-blocks of 32 as 16 quant bytes each (weight l in the low nibble of byte l, l + 16 in its high
// one: IQ4_NL's table indices). Weight d * (scale - 32) * table[q]. Lane t of a block's 8 reads sub-block t whole
// (4 quant words, the header's 2): its x is the 8 vectors of that sub-block, staged (quant_x_contiguous.wgsl).
const_assert LPB == 8u && XV == 8u;
//!include quant_x_contiguous.wgsl

//!include quant_x_plain.wgsl
//!include fma_dot.wgsl

struct Unit {
  q: array<u32, 4>,  // the lane's sub-block's quant words
  head: u32,         // d | scales_h
  low: u32,          // scales_l
  t: u32,            // the sub-block
}

fn load_unit(b: u32, t: u32) -> Unit {
  let a = b * BLOCK_BYTES / 4u;
  var q: array<u32, 4>;
  //!repeat I 4
  q[$I] = word(a + 2u + 4u * t + ${I}u);
  //!end
  return Unit(q, word(a), word(a + 1u), t);
}

// The table values of weights 4i .. 4i + 3 of the sub-block (i < 4: low nibbles of quant word i; i >= 4: high)
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  var q: array<vec4<f32>, 8>;
  //!repeat I 4
  q[$I] = iq4_low(u.q[$I]);
  q[$I + 4] = iq4_high(u.q[$I]);
  //!end
  return q;
}

//!include quant_values_once.wgsl

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  let scale = ((v.u.low >> (4u * v.u.t)) & 15u) | (((v.u.head >> (16u + 2u * v.u.t)) & 3u) << 4u);
  return unpack2x16float(v.u.head).x * (f32(scale) - 32.0) * whole_dots(v, xs);
}
