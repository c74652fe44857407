// Q5_K lanes for quant_gemv.wgsl: 176-byte super-blocks of 256 weights, always on 16 bytes: Q4_K's header and
// quants with a fifth bit a weight in 32 qh bytes (bit j of qh byte l: weight 32j + l). Lane t of a block's 8
// takes Q4_K's quant words t, t + 8, t + 16, t + 24 and qh word t (quant_units_q5_k.wgsl): value vector i =
// 2c + h (sub-block i) is the low (h = 0) or high nibbles of quant word t + 8c with bit i of each qh byte on
// top, and multiplies x vector 8i + t, as Q4_K's (quant_k_values.wgsl: scales, mins, the sum).
const_assert LPB == 8u && XV == 8u;
//!include quant_x_interleaved.wgsl

//!include quant_x_sums.wgsl

//!include quant_units_q5_k.wgsl

//!include quant_k_values.wgsl

// Sub-block 2c + h's 5-bit quants: nibble h of each byte of quant word `q`, bit 2c + h of each byte of `h5` as 16
fn fives(q: u32, h5: u32, c: u32, h: u32) -> vec4<f32> {
  let low = (q >> (4u * h)) & 0x0F0F0F0Fu;
  let top = ((h5 >> (2u * c + h)) & 0x01010101u) << 4u;
  return bytes_unsigned(low | top, 0.0);
}

fn unit_values(u: Unit) -> Values {
  return k_values(array<vec4<f32>, 8>(fives(u.q.x, u.h, 0u, 0u), fives(u.q.x, u.h, 0u, 1u), fives(u.q.y, u.h, 1u, 0u),
                                      fives(u.q.y, u.h, 1u, 1u), fives(u.q.z, u.h, 2u, 0u), fives(u.q.z, u.h, 2u, 1u),
                                      fives(u.q.w, u.h, 3u, 0u), fives(u.q.w, u.h, 3u, 1u)), u.head);
}
