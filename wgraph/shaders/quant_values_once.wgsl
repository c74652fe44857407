// A block's values for the readers that dequantize a lane's quants with quant_values(u) (the whole-block readers,
// quant_units_whole.wgsl; IQ4_XS by sub-blocks): with several rows of x (MAX_ROWS > 1) the lane's 32 quants as
// f32, made once for all the rows; with one row the unit itself, dequantized in unit_dot (the same instructions,
// and no array of 32 values held across the row).

struct Values {
  u: Unit,
  q: array<vec4<f32>, 8>,  // MAX_ROWS > 1: quant_values(u)
}

fn unit_values(u: Unit) -> Values {
  var q: array<vec4<f32>, 8>;
  if (MAX_ROWS > 1u) {
    q = quant_values(u);
  }
  return Values(u, q);
}

// The block's quant values (made here with one row of x) against the lane's 8 x vectors, as two fma chains
// (vectors 0-3 and 4-7): what Q4_0's, Q5_0's, IQ4_NL's, Q4_1's and Q5_1's unit_dot scale (quant_whole_d_dot.wgsl,
// quant_whole_dm_dot.wgsl), and IQ4_XS's (quant_lanes_iq4_xs.wgsl).
fn whole_dots(v: Values, xs: array<vec4<f32>, XV>) -> f32 {
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
  return lo + hi;
}
