// Q8_0 with one lane a whole block (LPB 1; a candidate reader, registry/quant.toml quant_gemv_r1_whole): the
// lane's 8 quant words (quant_units_whole_d_words.wgsl), word j giving weights 4j..4j+3 (x vector j), each d * q.
// Against the planned reader (8 lanes a block, each one quant word and the word holding d): d and its parity
// once per 32 weights instead of once per 4, and 9 word loads per 32 weights instead of 24.
const_assert XV == 8u;

//!include quant_x_plain.wgsl

//!include quant_units_whole_d_words.wgsl

fn unit_values(u: Unit) -> Values {
  return Values(array<vec4<f32>, 8>(bytes_signed(u.q[0]), bytes_signed(u.q[1]), bytes_signed(u.q[2]),
                                    bytes_signed(u.q[3]), bytes_signed(u.q[4]), bytes_signed(u.q[5]),
                                    bytes_signed(u.q[6]), bytes_signed(u.q[7])), u.d);
}
