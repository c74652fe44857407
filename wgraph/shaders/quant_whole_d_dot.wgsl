// unit_dot of the whole-block readers whose weight is d * (quant value) with d the block's first f16 (Q4_0, Q5_0:
// quant_lanes_q4_0_whole.wgsl, quant_lanes_q5_0_whole.wgsl, which define quant_values): quant_units_whole.wgsl's
// whole_dots times d.
fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  return block_d(v.u.w[0], v.u.odd) * whole_dots(v, xs);
}
