// unit_dot of the whole-block readers whose weight is d * q + m with d | m the block's first word (Q4_1, Q5_1:
// quant_lanes_q4_1_whole.wgsl, quant_lanes_q5_1_whole.wgsl, which define quant_values): quant_units_whole.wgsl's
// whole_dots times d, plus m times the sum of the lane's x.
fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xsum: XPart) -> f32 {
  var s = 0.0;
  //!repeat I 8
  s += xsum[$I];
  //!end
  let dm = unpack2x16float(v.u.w[0]);
  return fma(dm.x, whole_dots(v, xs), dm.y * s);
}
