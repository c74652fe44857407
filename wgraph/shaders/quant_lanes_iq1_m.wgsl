// IQ1_M lanes for quant_gemv.wgsl: 56-byte super-blocks of 256 weights, always on a word: a byte a group of 8 weights
// (IQ1_S's index bytes into the 2048 x 8-byte grid that follows the blocks, quant_gemv_core.wgsl's table_word), a
// nibble a group (3 more index bits, the sign of its delta 0.125), 4 u16 of 3-bit scales (one a 16 weights) whose
// top nibbles are d's 16 bits; weight d * (2s + 1) * (grid + delta). Lane t of a block's 8 reads sub-block t whole
// (x staged, as the other grid formats' readers).
const_assert LPB == 8u && XV == 8u;
//!include quant_x_contiguous.wgsl

//!include quant_x_plain.wgsl
//!include fma_dot.wgsl

struct Unit {
  idx: u32,     // the sub-block's 4 index bytes
  qh: u32,      // its 4 nibbles
  scales: u32,  // its two 3-bit scales (weights 0-15 in bits 0-2, 16-31 in bits 3-5)
  d: u32,       // d's bits
}

fn load_unit(b: u32, t: u32) -> Unit {
  let a = b * BLOCK_BYTES / 4u;
  let w0 = word(a + 12u);  // scale u16 0 and 1
  let w1 = word(a + 13u);  // 2 and 3
  let d = ((w0 >> 12u) & 0xFu) | ((w0 >> 24u) & 0xF0u) | ((w1 >> 4u) & 0xF00u) | ((w1 >> 16u) & 0xF000u);
  let pair = (select(w0, w1, t >= 4u) >> (16u * ((t / 2u) % 2u) + 6u * (t % 2u))) & 63u;
  return Unit(word(a + t), (word(a + 8u + t / 2u) >> (16u * (t % 2u))) & 0xFFFFu, pair, d);
}

// Weights 4i .. 4i + 3 of the sub-block: group i / 2's entry, half i % 2, plus its delta, times 2s + 1
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  var q: array<vec4<f32>, 8>;
  //!repeat L 4
  let n$L = (u.qh >> (4u * ${L}u)) & 15u;
  let e$L = (((u.idx >> (8u * ${L}u)) & 255u) | ((n$L & 7u) << 8u)) * 2u;
  let delta$L = vec4<f32>(select(0.125, -0.125, (n$L & 8u) != 0u));
  let s$L = f32(2u * ((u.scales >> (3u * (${L}u / 2u))) & 7u) + 1u);
  q[2 * $L] = (bytes_signed(table_word(e$L)) + delta$L) * s$L;
  q[2 * $L + 1] = (bytes_signed(table_word(e$L + 1u)) + delta$L) * s$L;
  //!end
  return q;
}

//!include quant_values_once.wgsl

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return unpack2x16float(v.u.d).x * whole_dots(v, xs);
}
