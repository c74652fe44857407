// Q4_K lanes for quant_gemv.wgsl: 144-byte super-blocks of 256 weights, always on 16 bytes: a header of 16
// bytes (d, dmin f16; 12 bytes of 6-bit scales sc and mins mn of 8 sub-blocks), then 32 quant words; quant
// word 8c + l holds weights 64c + 4l..64c + 4l + 3 in its low nibbles (sub-block 2c) and the same + 32 in its
// high nibbles (sub-block 2c + 1). Lane t of a block's 8 takes quant words t, t + 8, t + 16, t + 24: value
// vector i = 2c + h (sub-block i) multiplies x vector 8i + t (= 16c + 8h + t), so the lanes' x loads are
// neighbours. A lane needs all 8 scales and mins: four SWAR masks give them as bytes, the header read once
// as one 16-byte word; weight d * sc * q - dmin * mn.
const_assert LPB == 8u && XV == 8u;
//!include quant_x_interleaved.wgsl

//!include quant_x_sums.wgsl

//!include quant_units_q4_k.wgsl

struct Values {
  v: array<vec4<f32>, 8>,  // q of sub-block i (the lane's 4 of its 32 weights)
  sc: array<vec4<f32>, 2>,  // sc of sub-blocks 0-3, 4-7
  mn: array<vec4<f32>, 2>,  // mn of sub-blocks 0-3, 4-7
  dm: vec2<f32>,            // d, dmin
}

fn unit_values(u: Unit) -> Values {
  // scale bytes: sc j < 4 and mn j < 4 in the low 6 bits of bytes j and 4 + j; sc, mn j >= 4 in the low and
  // high nibbles of byte 4 + j with their top 2 bits in the top of bytes j - 4 and j
  let s0 = u.head.y;
  let s1 = u.head.z;
  let s2 = u.head.w;
  return Values(
    array<vec4<f32>, 8>(nibbles_low(u.q.x, 0.0), nibbles_high(u.q.x, 0.0), nibbles_low(u.q.y, 0.0),
                        nibbles_high(u.q.y, 0.0), nibbles_low(u.q.z, 0.0), nibbles_high(u.q.z, 0.0),
                        nibbles_low(u.q.w, 0.0), nibbles_high(u.q.w, 0.0)),
    array<vec4<f32>, 2>(bytes_unsigned(s0 & 0x3F3F3F3Fu, 0.0),
                        bytes_unsigned((s2 & 0x0F0F0F0Fu) | ((s0 >> 2u) & 0x30303030u), 0.0)),
    array<vec4<f32>, 2>(bytes_unsigned(s1 & 0x3F3F3F3Fu, 0.0),
                        bytes_unsigned(((s2 >> 4u) & 0x0F0F0F0Fu) | ((s1 >> 2u) & 0x30303030u), 0.0)),
    unpack2x16float(u.head.x));
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xsum: XPart) -> f32 {
  let s_lo = vec4<f32>(dot(v.v[0], xs[0]), dot(v.v[1], xs[1]), dot(v.v[2], xs[2]), dot(v.v[3], xs[3]));
  let s_hi = vec4<f32>(dot(v.v[4], xs[4]), dot(v.v[5], xs[5]), dot(v.v[6], xs[6]), dot(v.v[7], xs[7]));
  let x_lo = vec4<f32>(xsum[0], xsum[1], xsum[2], xsum[3]);
  let x_hi = vec4<f32>(xsum[4], xsum[5], xsum[6], xsum[7]);
  return v.dm.x * (dot(v.sc[0], s_lo) + dot(v.sc[1], s_hi)) - v.dm.y * (dot(v.mn[0], x_lo) + dot(v.mn[1], x_hi));
}
