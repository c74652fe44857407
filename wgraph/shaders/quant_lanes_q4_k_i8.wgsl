// Q4_K by integer dots (a tuning candidate): the super-blocks and the lanes as quant_lanes_q4_k.wgsl (lane t of a
// block's 8 takes quant words t, t + 8, t + 16, t + 24: weights 4t .. 4t + 3 of sub-blocks 2c in their low
// nibbles, of 2c + 1 in their high), x rounded to int8 per sub-block as it is staged (quant_x_i8_staged_k.wgsl).
// A weight is d * sc_i * q - dmin * mn_i: the lane's sum is sum_i d * sc_i * step_i * dot(q_i, xq_i) over its 8
// sub-blocks, minus dmin * mn_t * (the sum of x' over sub-block t): quant_k_min_i8.wgsl.
const_assert LPB == 8u && XV == 8u;
//!include quant_x_i8_staged_k.wgsl

//!include quant_units_q4_k.wgsl
//!include quant_k_min_i8.wgsl

fn unit_values(u: Unit) -> Values {
  return k_min_values(u.q & vec4<u32>(0x0F0F0F0Fu), (u.q >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu), u.head, u.t);
}
