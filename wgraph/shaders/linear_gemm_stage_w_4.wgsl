// linear_gemm.wgsl's staging of W a group of 4 loads at a time (W_QUAD = 4): the 4 features at one k are one
// vec4 (w_at is a multiple of 4), so a group takes 4 vec4 stores
//!repeat Q LOADS_W / 4u
{
  let w0 = ready_w(w_next${Q}_0, k0 + w_k$Q, k_end);
  let w1 = ready_w(w_next${Q}_1, k0 + w_k$Q, k_end);
  let w2 = ready_w(w_next${Q}_2, k0 + w_k$Q, k_end);
  let w3 = ready_w(w_next${Q}_3, k0 + w_k$Q, k_end);
  //!repeat C 4
  ws[(w_at$Q + ${C}u * STRIDE_N) / 4u] = vec4<f32>(w0[$C], w1[$C], w2[$C], w3[$C]);
  //!end
}
//!end
