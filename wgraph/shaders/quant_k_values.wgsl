// A lane's values of a K-quant super-block with 8 sub-blocks of 32 and a 16-byte header (d, dmin, the 12 bytes
// of 6-bit scales sc and mins mn): Q4_K and Q5_K (quant_lanes_q4_k.wgsl, quant_lanes_q5_k.wgsl), whose lane t of
// a block's 8 holds weights 4t .. 4t + 3 of every sub-block i as value vector i, multiplying x vector 8i + t.
// A lane needs all 8 scales and mins: four SWAR masks give them as bytes; weight d * sc * q - dmin * mn.

//!include quant_k_min_dot.wgsl

// The values of quants v (vector i: sub-block i) under the header `head` (d | dmin, the scale bytes 0-3, 4-7, 8-11)
fn k_values(v: array<vec4<f32>, 8>, head: vec4<u32>) -> Values {
  // scale bytes: sc j < 4 and mn j < 4 in the low 6 bits of bytes j and 4 + j; sc, mn j >= 4 in the low and
  // high nibbles of byte 4 + j with their top 2 bits in the top of bytes j - 4 and j
  let s0 = head.y;
  let s1 = head.z;
  let s2 = head.w;
  return Values(
    v,
    array<vec4<f32>, 2>(bytes_unsigned(s0 & 0x3F3F3F3Fu, 0.0),
                        bytes_unsigned((s2 & 0x0F0F0F0Fu) | ((s0 >> 2u) & 0x30303030u), 0.0)),
    array<vec4<f32>, 2>(bytes_unsigned(s1 & 0x3F3F3F3Fu, 0.0),
                        bytes_unsigned(((s2 >> 4u) & 0x0F0F0F0Fu) | ((s1 >> 2u) & 0x30303030u), 0.0)),
    unpack2x16float(head.x));
}
