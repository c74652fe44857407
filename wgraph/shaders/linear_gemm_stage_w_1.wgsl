// linear_gemm.wgsl's staging of W one load at a time (W_QUAD = 1): 4 scalar stores a load, one feature at 4 k
//!repeat Q LOADS_W
{
  let wv = ready_w(w_next${Q}_0, k0 + w_k$Q, k_end);
  //!repeat C 4
  ws[(w_at$Q + ${C}u * STRIDE_N) / 4u][w_at$Q % 4u] = wv[$C];
  //!end
}
//!end
