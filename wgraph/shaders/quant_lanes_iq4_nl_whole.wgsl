// IQ4_NL by whole blocks for quant_gemv.wgsl (one lane a block; x staged, quant_gemv_core.wgsl): Q4_0's 18-byte
// block (d, then the 16 quant bytes: weight i in the low nibble of byte i, i + 16 in its high one), its nibbles
// indices into IQ4_NL's table of 16 values (quant_common.wgsl's iq4_low / iq4_high) instead of q - 8. Loaded and
// realigned as Q4_0's whole-block reader does (quant_lanes_q4_0_whole.wgsl).
const_assert LPB == 1u;
//!include quant_x_contiguous.wgsl
const WORDS: u32 = 5u;

//!include quant_x_plain.wgsl
//!include fma_dot.wgsl
//!include quant_units_whole.wgsl
//!include quant_values_once.wgsl

// The table values of weights 4i .. 4i + 3 (i < 4: low nibbles of quant word i; i >= 4: high nibbles of i - 4)
fn quant_values(u: Unit) -> array<vec4<f32>, 8> {
  var q: array<vec4<f32>, 8>;
  //!repeat I 4
  let w$I = quant_word(u.w[$I], u.w[$I + 1], u.odd);
  q[$I] = iq4_low(w$I);
  q[$I + 4] = iq4_high(w$I);
  //!end
  return q;
}

//!include quant_whole_d_dot.wgsl
