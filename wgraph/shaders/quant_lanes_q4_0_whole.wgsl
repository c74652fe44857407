// Q4_0 with one lane a whole block (LPB 1; a candidate reader, registry/quant.toml quant_gemv_r1_whole): the
// lane's 4 quant words (quant_units_whole_d_words.wgsl), word j giving weights 4j..4j+3 in its low nibbles (x
// vector j) and 16+4j..16+4j+3 in its high nibbles (x vector 4 + j), each d * (q - 8). Against the planned reader
// (4 lanes a block, each one quant word and the word holding d): d and its parity once per 32 weights instead
// of once per 8, and 5 word loads per 32 weights instead of 12; the x vectors a warp loads are then 128 bytes
// apart from lane to lane.
const_assert XV == 8u;

//!include quant_x_plain.wgsl

//!include quant_units_whole_d_words.wgsl

fn unit_values(u: Unit) -> Values {
  return Values(array<vec4<f32>, 8>(nibbles_low(u.q[0], 8.0), nibbles_low(u.q[1], 8.0), nibbles_low(u.q[2], 8.0),
                                    nibbles_low(u.q[3], 8.0), nibbles_high(u.q[0], 8.0), nibbles_high(u.q[1], 8.0),
                                    nibbles_high(u.q[2], 8.0), nibbles_high(u.q[3], 8.0)), u.d);
}
