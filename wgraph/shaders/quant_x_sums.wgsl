// The x part of the formats with a min (Q4_1, Q4_K): the sums of the lane's x vectors, which the min (an
// offset per block or sub-block) multiplies; computed once per row of x for all the slot's weight rows
// (quant_gemv_core.wgsl's accumulate). Included by their lane readers.
alias XPart = array<f32, XV>;

fn x_part(xs: array<vec4<f32>, XV>) -> XPart {
  var xsum: XPart;
  //!repeat I XV
  xsum[$I] = dot(xs[$I], vec4<f32>(1.0));
  //!end
  return xsum;
}
