// A lane's values of a K-quant super-block with 8 sub-blocks of 32 and a 16-byte header (d, dmin, the 12 bytes
// of 6-bit scales sc and mins mn): Q4_K and Q5_K (quant_lanes_q4_k.wgsl, quant_lanes_q5_k.wgsl), whose lane t of
// a block's 8 holds weights 4t .. 4t + 3 of every sub-block i as value vector i, multiplying x vector 8i + t.
// A lane needs all 8 scales and mins: four SWAR masks give them as bytes; weight d * sc * q - dmin * mn.

struct Values {
  v: array<vec4<f32>, 8>,  // q of sub-block i (the lane's 4 of its 32 weights)
  sc: array<vec4<f32>, 2>,  // sc of sub-blocks 0-3, 4-7
  mn: array<vec4<f32>, 2>,  // mn of sub-blocks 0-3, 4-7
  dm: vec2<f32>,            // d, dmin
}

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

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xsum: XPart) -> f32 {
  let s_lo = vec4<f32>(dot(v.v[0], xs[0]), dot(v.v[1], xs[1]), dot(v.v[2], xs[2]), dot(v.v[3], xs[3]));
  let s_hi = vec4<f32>(dot(v.v[4], xs[4]), dot(v.v[5], xs[5]), dot(v.v[6], xs[6]), dot(v.v[7], xs[7]));
  let x_lo = vec4<f32>(xsum[0], xsum[1], xsum[2], xsum[3]);
  let x_hi = vec4<f32>(xsum[4], xsum[5], xsum[6], xsum[7]);
  return v.dm.x * (dot(v.sc[0], s_lo) + dot(v.sc[1], s_hi)) - v.dm.y * (dot(v.mn[0], x_lo) + dot(v.mn[1], x_hi));
}
