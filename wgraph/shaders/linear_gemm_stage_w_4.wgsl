// linear_gemm.wgsl's staging of W a group of 4 loads at a time (W_QUAD = 4): the 4 features at one k are one
// vec4 (w_at is a multiple of 4), so a group takes 4 vec4 stores
//!repeat Q LOADS_W / 4u
//!repeat C 4
ws[(w_at$Q + ${C}u * STRIDE_N) / 4u] = vec4<f32>(w_next${Q}_0[$C], w_next${Q}_1[$C],
                                                 w_next${Q}_2[$C], w_next${Q}_3[$C]);
//!end
//!end
