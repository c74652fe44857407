// The x part of the formats whose dot uses x as it is (Q4_0, Q8_0: no min), for quant_gemv_core.wgsl's
// accumulate: included by their lane readers.
alias XPart = f32;

fn x_part(xs: array<vec4<f32>, XV>) -> XPart {
  return 0.0;
}
