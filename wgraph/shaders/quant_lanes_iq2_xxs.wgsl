// IQ2_XXS lanes for quant_gemv.wgsl: 66-byte super-blocks of 256 weights: d f16, then for each sub-block j of 32
// two words: 4 grid indices (a byte each: 8 weights' magnitudes, an entry of the 256 x 8-byte grid that follows
// the blocks, quant_gemv_core.wgsl's table_word) and 4 x 7 sign codes (iq_signs) under a 4-bit scale s; weight
// d * (0.5 + s) / 4 * magnitude * sign. Lane t of a block's 8 reads sub-block t whole (its x the sub-block's 8
// vectors, staged: quant_x_contiguous.wgsl). 66 bytes: an odd block starts 2 bytes into a word (quant_bytes4.wgsl).
const_assert LPB == 8u && XV == 8u;
//!include quant_x_contiguous.wgsl

//!include quant_x_plain.wgsl
//!include fma_dot.wgsl
//!include quant_bytes4.wgsl

struct Unit {
  grid: u32,   // the sub-block's 4 grid indices
  signs: u32,  // its sign codes, the scale in the top 4 bits
  d: u32,      // the word holding d in its low half
}

fn load_unit(b: u32, t: u32) -> Unit {
  let at = b * BLOCK_BYTES;
  return Unit(bytes4(at + 2u + 8u * t), bytes4(at + 6u + 8u * t), bytes4(at));
}

// Weights 4i .. 4i + 3 of the sub-block: grid entry i / 2's half i % 2, signed
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  var q: array<vec4<f32>, 8>;
  //!repeat L 4
  let e$L = ((u.grid >> (8u * ${L}u)) & 255u) * 2u;
  let c$L = (u.signs >> (7u * ${L}u)) & 127u;
  q[2 * $L] = bytes_unsigned(table_word(e$L), 0.0) * iq_signs(c$L, 0u);
  q[2 * $L + 1] = bytes_unsigned(table_word(e$L + 1u), 0.0) * iq_signs(c$L, 1u);
  //!end
  return q;
}

//!include quant_values_once.wgsl

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  let d = unpack2x16float(v.u.d).x * (0.5 + f32(v.u.signs >> 28u)) * 0.25;
  return d * whole_dots(v, xs);
}
