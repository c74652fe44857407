// Q2_K lanes for quant_gemv.wgsl: 84-byte super-blocks of 256 weights, always on a word: 16 scale bytes (sub-block
// s of 16 weights: its scale sc in the low nibble of byte s, its min mn in the high), qs (64 bytes: 2 bits a
// weight, laid out as Q3_K's), f16 d and dmin; w = d * sc * q - dmin * mn. Lane t of a block's 8 takes qs word
// 8n + t of each half n: value vector i = 4n + j (bits 2j, 2j + 1 of each byte) multiplies x vector t + 8i
// (quant_x_interleaved.wgsl) under sub-block 8n + 2j + t / 4's scale and min (quant_k_min_dot.wgsl).
const_assert LPB == 8u && XV == 8u;

//!include quant_x_interleaved.wgsl
//!include quant_x_sums.wgsl
//!include quant_k_min_dot.wgsl

//!include quant_units_q2_k.wgsl

fn unit_values(u: Unit) -> Values {
  let q = q2_words(u);
  var v: array<vec4<f32>, 8>;
  //!repeat I 8
  v[$I] = bytes_unsigned(q[$I], 0.0);
  //!end
  let s = q2_scales(u);
  return Values(v, s.sc, s.mn, unpack2x16float(u.dm));
}
