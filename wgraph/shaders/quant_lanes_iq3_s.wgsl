// IQ3_S lanes for quant_gemv.wgsl: 110-byte super-blocks of 256 weights: d f16, a byte a group of 4 weights (the low
// 8 bits of its index into the 512 x 4-byte grid that follows the blocks, quant_gemv_core.wgsl's table_word), the
// 9th index bits (a byte a sub-block of 32), the sign bits (4 bytes a sub-block: signs4), a scale nibble a
// sub-block; weight d * (1 + 2s) * magnitude * sign. Lane t of a block's 8 reads sub-block t whole (x staged,
// as IQ2_XXS's reader); an odd block starts 2 bytes into a word (quant_bytes4.wgsl).
const_assert LPB == 8u && XV == 8u;
//!include quant_x_contiguous.wgsl

//!include quant_x_plain.wgsl
//!include fma_dot.wgsl
//!include quant_bytes4.wgsl

struct Unit {
  idx: array<u32, 2>,  // the sub-block's 8 index bytes
  signs: u32,          // its 32 sign bits
  high: u32,           // its 9th index bits (byte 0) and scale (bits 8-11)
  d: u32,              // the word holding d in its low half
}

fn load_unit(b: u32, t: u32) -> Unit {
  let at = b * BLOCK_BYTES;
  let qh = (bytes4(at + 66u + (t & 6u)) >> (8u * (t & 1u))) & 255u;
  let scale = (bytes4(at + 106u) >> (8u * (t / 2u) + 4u * (t % 2u))) & 15u;
  return Unit(array<u32, 2>(bytes4(at + 2u + 8u * t), bytes4(at + 6u + 8u * t)), bytes4(at + 74u + 4u * t),
              qh | (scale << 8u), bytes4(at));
}

// Weights 4i .. 4i + 3 of the sub-block: entry i, signed by bits 4i .. 4i + 3
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  var q: array<vec4<f32>, 8>;
  //!repeat I 8
  q[$I] = bytes_unsigned(table_word(((u.idx[$I / 4] >> (8u * (${I}u % 4u))) & 255u) | (((u.high >> ${I}u) & 1u) << 8u)),
                         0.0) * signs4(u.signs, 4u * ${I}u);
  //!end
  return q;
}

//!include quant_values_once.wgsl

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return unpack2x16float(v.u.d).x * (1.0 + 2.0 * f32(v.u.high >> 8u)) * whole_dots(v, xs);
}
