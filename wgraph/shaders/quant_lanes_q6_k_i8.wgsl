// Q6_K by integer dots (a tuning candidate): the super-blocks and the lanes as quant_lanes_q6_k.wgsl (lane t of a
// block's 8 takes weights 4t .. 4t + 3 of every sub-block of 32: value vector i against x word t of sub-block i),
// x rounded to int8 per sub-block of 32 as it is staged (quant_x_i8_staged_k.wgsl). A weight is d * scale * (q - 32),
// a lane's 4 weights of a sub-block under one scale: its sum per row of W is sum_i d * scale_i * step_i *
// dot(q_i - 32, xq_i), the 6-bit quants made signed bytes (quant_k_scale_i8.wgsl).
const_assert LPB == 8u && XV == 8u;
//!include quant_x_i8_staged_k.wgsl

//!include quant_units_q6_k.wgsl
//!include quant_k_scale_i8.wgsl
