// Q4_K lanes for quant_gemv.wgsl: 144-byte super-blocks of 256 weights, always on 16 bytes: a header of 16
// bytes (d, dmin f16; 12 bytes of 6-bit scales sc and mins mn of 8 sub-blocks), then 32 quant words; quant
// word 8c + l holds weights 64c + 4l..64c + 4l + 3 in its low nibbles (sub-block 2c) and the same + 32 in its
// high nibbles (sub-block 2c + 1). Lane t of a block's 8 takes quant words t, t + 8, t + 16, t + 24: value
// vector i = 2c + h (sub-block i) multiplies x vector 8i + t (= 16c + 8h + t), so the lanes' x loads are
// neighbours. The header is read once as one 16-byte word; the scales, mins and the sum: quant_k_values.wgsl.
const_assert LPB == 8u && XV == 8u;
//!include quant_x_interleaved.wgsl

//!include quant_x_sums.wgsl

//!include quant_units_q4_k.wgsl

//!include quant_k_values.wgsl

fn unit_values(u: Unit) -> Values {
  return k_values(array<vec4<f32>, 8>(nibbles_low(u.q.x, 0.0), nibbles_high(u.q.x, 0.0), nibbles_low(u.q.y, 0.0),
                                      nibbles_high(u.q.y, 0.0), nibbles_low(u.q.z, 0.0), nibbles_high(u.q.z, 0.0),
                                      nibbles_low(u.q.w, 0.0), nibbles_high(u.q.w, 0.0)), u.head);
}
