// IQ3_XXS lanes for quant_gemv.wgsl: 98-byte super-blocks of 256 weights: d f16, 64 grid indices (8 a sub-block of
// 32; a byte each: 4 weights' magnitudes, an entry of the 256 x 4-byte grid that follows the blocks,
// quant_gemv_core.wgsl's table_word), then a word a sub-block: 4 x 7 sign codes (iq_signs) under a 4-bit scale s;
// weight d * (0.5 + s) / 2 * magnitude * sign. Lane t of a block's 8 reads sub-block t whole (x staged:
// quant_x_contiguous.wgsl); an odd block starts 2 bytes into a word (quant_bytes4.wgsl).
const_assert LPB == 8u && XV == 8u;
//!include quant_x_contiguous.wgsl

//!include quant_x_plain.wgsl
//!include fma_dot.wgsl
//!include quant_bytes4.wgsl

struct Unit {
  grid: array<u32, 2>,  // the sub-block's 8 grid indices
  signs: u32,           // its sign codes, the scale in the top 4 bits
  d: u32,               // the word holding d in its low half
}

fn load_unit(b: u32, t: u32) -> Unit {
  let at = b * BLOCK_BYTES;
  return Unit(array<u32, 2>(bytes4(at + 2u + 8u * t), bytes4(at + 6u + 8u * t)), bytes4(at + 66u + 4u * t),
              bytes4(at));
}

// Weights 4i .. 4i + 3 of the sub-block: grid entry i (index byte i), signed by half i % 2 of code i / 2
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  var q: array<vec4<f32>, 8>;
  //!repeat I 8
  q[$I] = bytes_unsigned(table_word((u.grid[$I / 4] >> (8u * (${I}u % 4u))) & 255u), 0.0)
          * iq_signs((u.signs >> (7u * (${I}u / 2u))) & 127u, ${I}u % 2u);
  //!end
  return q;
}

//!include quant_values_once.wgsl

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  let d = unpack2x16float(v.u.d).x * (0.5 + f32(v.u.signs >> 28u)) * 0.5;
  return d * whole_dots(v, xs);
}
