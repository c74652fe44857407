// IQ2_S lanes for quant_gemv.wgsl: 82-byte super-blocks of 256 weights: d f16, a byte a group of 8 weights (the low
// 8 bits of its index into the 1024 x 8-byte grid that follows the blocks, quant_gemv_core.wgsl's table_word), a
// sign byte a group (a bit a weight: signs4), 2 more index bits a group (a byte a sub-block of 32), a scale byte a
// sub-block (a nibble each 16 weights); weight d * (0.5 + s) / 4 * magnitude * sign. Lane t of a block's 8 reads
// sub-block t whole (x staged, as IQ2_XXS's reader).
const_assert LPB == 8u && XV == 8u;
//!include quant_x_contiguous.wgsl

//!include quant_x_plain.wgsl
//!include fma_dot.wgsl
//!include quant_bytes4.wgsl

struct Unit {
  idx: u32,    // the sub-block's 4 index bytes
  signs: u32,  // its 4 sign bytes
  high: u32,   // its 2-bit index tops (byte 0) and scale byte (byte 1)
  d: u32,      // the word holding d in its low half
}

fn load_unit(b: u32, t: u32) -> Unit {
  let at = b * BLOCK_BYTES;
  let qh = (bytes4(at + 66u + (t & 6u)) >> (8u * (t & 1u))) & 255u;
  let scale = (bytes4(at + 74u + (t & 6u)) >> (8u * (t & 1u))) & 255u;
  return Unit(bytes4(at + 2u + 4u * t), bytes4(at + 34u + 4u * t), qh | (scale << 8u), bytes4(at));
}

// Weights 4i .. 4i + 3 of the sub-block: group i / 2's entry, half i % 2, signed, times 0.5 + its scale
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  var q: array<vec4<f32>, 8>;
  //!repeat L 4
  let e$L = (((u.idx >> (8u * ${L}u)) & 255u) | (((u.high >> (2u * ${L}u)) & 3u) << 8u)) * 2u;
  let s$L = 0.5 + f32((u.high >> (8u + 4u * (${L}u / 2u))) & 15u);
  q[2 * $L] = bytes_unsigned(table_word(e$L), 0.0) * signs4(u.signs, 8u * ${L}u) * s$L;
  q[2 * $L + 1] = bytes_unsigned(table_word(e$L + 1u), 0.0) * signs4(u.signs, 8u * ${L}u + 4u) * s$L;
  //!end
  return q;
}

//!include quant_values_once.wgsl

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return unpack2x16float(v.u.d).x * 0.25 * whole_dots(v, xs);
}
