// unit_dot of the whole-block readers whose weight is d * (quant value) with d the block's first f16 (Q4_0, Q5_0:
// quant_lanes_q4_0_whole.wgsl, quant_lanes_q5_0_whole.wgsl, which define quant_values): the values (per row with
// one row of x, made once a block with several; quant_units_whole.wgsl) against the lane's 8 x vectors, in two
// fma chains (vectors 0-3 and 4-7), times d.
fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  var q = v.q;
  if (MAX_ROWS == 1u) {
    q = quant_values(v.u);
  }
  var lo = 0.0;
  var hi = 0.0;
  //!repeat I 4
  lo = fma_dot(q[$I], xs[$I], lo);
  hi = fma_dot(q[$I + 4], xs[$I + 4], hi);
  //!end
  return block_d(v.u.w[0], v.u.odd) * (lo + hi);
}
