// unit_dot of the whole-block readers whose weight is d * q + m with d | m the block's first word (Q4_1, Q5_1:
// quant_lanes_q4_1_whole.wgsl, quant_lanes_q5_1_whole.wgsl, which define quant_values): the quant values (per row
// with one row of x, made once a block with several; quant_units_whole.wgsl) against the lane's 8 x vectors in
// two fma chains, times d, plus m times the sum of the lane's x.
fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xsum: XPart) -> f32 {
  var q = v.q;
  if (MAX_ROWS == 1u) {
    q = quant_values(v.u);
  }
  var lo = 0.0;
  var hi = 0.0;
  var s = 0.0;
  //!repeat I 4
  lo = fma_dot(q[$I], xs[$I], lo);
  hi = fma_dot(q[$I + 4], xs[$I + 4], hi);
  //!end
  //!repeat I 8
  s += xsum[$I];
  //!end
  let dm = unpack2x16float(v.u.w[0]);
  return fma(dm.x, lo + hi, dm.y * s);
}
