// IQ2_XS lanes for quant_gemv.wgsl: 74-byte super-blocks of 256 weights: d f16, a u16 a group of 8 weights (a 9-bit
// index into the 512 x 8-byte grid that follows the blocks, quant_gemv_core.wgsl's table_word, and a 7-bit sign
// code: iq_signs), then a scale byte a sub-block of 32 (a nibble each 16 weights); weight d * (0.5 + s) / 4 *
// magnitude * sign. Lane t of a block's 8 reads sub-block t whole (x staged, as IQ2_XXS's reader).
const_assert LPB == 8u && XV == 8u;
//!include quant_x_contiguous.wgsl

//!include quant_x_plain.wgsl
//!include fma_dot.wgsl
//!include quant_bytes4.wgsl

struct Unit {
  q: array<u32, 2>,  // the sub-block's 4 u16 (groups 0, 1; 2, 3)
  scale: u32,        // its scale byte
  d: u32,            // the word holding d in its low half
}

fn load_unit(b: u32, t: u32) -> Unit {
  let at = b * BLOCK_BYTES;
  return Unit(array<u32, 2>(bytes4(at + 2u + 8u * t), bytes4(at + 6u + 8u * t)),
              (bytes4(at + 66u + (t & 6u)) >> (8u * (t & 1u))) & 255u, bytes4(at));
}

// Weights 4i .. 4i + 3 of the sub-block: group i / 2's entry, half i % 2, signed, times 0.5 + its scale
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  var q: array<vec4<f32>, 8>;
  //!repeat L 4
  let g$L = (u.q[$L / 2] >> (16u * (${L}u % 2u))) & 0xFFFFu;
  let s$L = 0.5 + f32((u.scale >> (4u * (${L}u / 2u))) & 15u);
  q[2 * $L] = bytes_unsigned(table_word((g$L & 511u) * 2u), 0.0) * iq_signs(g$L >> 9u, 0u) * s$L;
  q[2 * $L + 1] = bytes_unsigned(table_word((g$L & 511u) * 2u + 1u), 0.0) * iq_signs(g$L >> 9u, 1u) * s$L;
  //!end
  return q;
}

//!include quant_values_once.wgsl

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return unpack2x16float(v.u.d).x * 0.25 * whole_dots(v, xs);
}
