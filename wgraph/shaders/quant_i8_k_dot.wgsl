// The integer-dot sum of a lane of a K-quant super-block read by 8 lanes (quant_lanes_q4_k_i8.wgsl,
// quant_lanes_q6_k_i8.wgsl) against x staged by quant_x_i8_staged_k.wgsl: the lane's int8 words of the even
// (0, 2, 4, 6) and the odd sub-blocks against x's, 8 dot4I8Packed, each dot made a float exactly (exact_f32)
// and scaled by its sub-block's weight scale (`sc_even`, `sc_odd`: d * scale) and x step
fn k_i8_dot(even: vec4<u32>, odd: vec4<u32>, sc_even: vec4<f32>, sc_odd: vec4<f32>, xp: XPart) -> f32 {
  let d_even = vec4<i32>(dot4I8Packed(even.x, xp.even.x), dot4I8Packed(even.y, xp.even.y),
                         dot4I8Packed(even.z, xp.even.z), dot4I8Packed(even.w, xp.even.w));
  let d_odd = vec4<i32>(dot4I8Packed(odd.x, xp.odd.x), dot4I8Packed(odd.y, xp.odd.y),
                        dot4I8Packed(odd.z, xp.odd.z), dot4I8Packed(odd.w, xp.odd.w));
  // the steps last: sc * step may be below f32's normal range (flushed to 0 on a device that flushes subnormals)
  // where the product with the dot is not (quant_i8_round.wgsl)
  return dot(xp.st_even, sc_even * exact_f32(d_even)) + dot(xp.st_odd, sc_odd * exact_f32(d_odd));
}
