// IQ1_S lanes for quant_gemv.wgsl: 50-byte super-blocks of 256 weights: d f16, a byte a group of 8 weights (the low
// 8 bits of its index into the 2048 x 8-byte grid of -1, 0, 1 that follows the blocks, quant_gemv_core.wgsl's
// table_word), then a u16 a sub-block of 32 (3 more index bits a group, a 3-bit scale s, the sign of the delta
// 0.125 in bit 15); weight d * (2s + 1) * (grid + delta). Lane t of a block's 8 reads sub-block t whole (x staged,
// as the other grid formats' readers); an odd block starts 2 bytes into a word (quant_bytes4.wgsl).
const_assert LPB == 8u && XV == 8u;
//!include quant_x_contiguous.wgsl

//!include quant_x_plain.wgsl
//!include fma_dot.wgsl
//!include quant_bytes4.wgsl

struct Unit {
  idx: u32,  // the sub-block's 4 index bytes
  qh: u32,   // its u16
  d: u32,    // the word holding d in its low half
}

fn load_unit(b: u32, t: u32) -> Unit {
  let at = b * BLOCK_BYTES;
  return Unit(bytes4(at + 2u + 4u * t), bytes4(at + 34u + 2u * t) & 0xFFFFu, bytes4(at));
}

// Weights 4i .. 4i + 3 of the sub-block: group i / 2's entry, half i % 2, plus the delta
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  var q: array<vec4<f32>, 8>;
  let delta = vec4<f32>(select(0.125, -0.125, (u.qh & 0x8000u) != 0u));
  //!repeat L 4
  let e$L = (((u.idx >> (8u * ${L}u)) & 255u) | (((u.qh >> (3u * ${L}u)) & 7u) << 8u)) * 2u;
  q[2 * $L] = bytes_signed(table_word(e$L)) + delta;
  q[2 * $L + 1] = bytes_signed(table_word(e$L + 1u)) + delta;
  //!end
  return q;
}

//!include quant_values_once.wgsl

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return unpack2x16float(v.u.d).x * f32(2u * ((v.u.qh >> 12u) & 7u) + 1u) * whole_dots(v, xs);
}
