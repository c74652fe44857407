// Q5_K by integer dots (a tuning candidate): the super-blocks and the lanes as quant_lanes_q5_k.wgsl (Q4_K's, with
// the fifth bits of the lane's weights in qh word t: bit i of each byte for sub-block i), x rounded to int8 per
// sub-block as it is staged (quant_x_i8_staged_k.wgsl); the quants as int8 (0..31) and the sum as Q4_K's
// (quant_k_min_i8.wgsl).
const_assert LPB == 8u && XV == 8u;
//!include quant_x_i8_staged_k.wgsl

//!include quant_units_q5_k.wgsl
//!include quant_k_min_i8.wgsl

// The fifth bits of sub-blocks 0, 2, 4, 6 (odd: 1, 3, 5, 7) of the lane's qh word at bit 4 of each byte
fn fifth_bits(h: u32, odd: u32) -> vec4<u32> {
  return ((vec4<u32>(h) >> (vec4<u32>(0u, 2u, 4u, 6u) + odd)) & vec4<u32>(0x01010101u)) << vec4<u32>(4u);
}

fn unit_values(u: Unit) -> Values {
  return k_min_values((u.q & vec4<u32>(0x0F0F0F0Fu)) | fifth_bits(u.h, 0u),
                      ((u.q >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu)) | fifth_bits(u.h, 1u), u.head, u.t);
}
