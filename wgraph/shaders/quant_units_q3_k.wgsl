// A lane's share of one Q3_K super-block (quant_lanes_q3_k.wgsl's header: the layout, which words lane t takes)
// for the f32 reader and the integer-dot one (quant_lanes_q3_k_i8.wgsl): the qs word of each half, the hmask word
// and bytes 96 .. 111 (the scales, d), each field realigned where the block starts mid-word.
//!include quant_bytes4.wgsl

struct Unit {
  q: array<u32, 2>,     // the qs word of half 0, of half 1
  h: u32,               // the hmask word
  tail: array<u32, 4>,  // bytes 96 .. 111: the 3 scale words, then d (and 2 bytes past the block)
  upper: bool,          // t >= 4: the lane's scales are the odd bytes of each pair
}

fn load_unit(b: u32, t: u32) -> Unit {
  let at = b * BLOCK_BYTES;
  let q = array<u32, 2>(bytes4(at + 32u + 4u * t), bytes4(at + 64u + 4u * t));
  let h = bytes4(at + 4u * t);
  var tail: array<u32, 4>;  // bytes 96 .. 111
  //!repeat I 4
  tail[$I] = bytes4(at + 96u + 4u * ${I}u);
  //!end
  return Unit(q, h, tail, t >= 4u);
}

// The lane's 3-bit quants (0..7) of value vector i = 4n + j as the bytes of word i: bits 2j, 2j + 1 of each byte of
// half n's qs word, and bit 4n + j of each hmask byte on top
fn q3_words(u: Unit) -> array<u32, 8> {
  var q: array<u32, 8>;
  //!repeat N 2
  //!repeat J 4
  q[4 * $N + $J] = ((u.q[$N] >> (2u * ${J}u)) & 0x03030303u) | (((u.h >> (4u * ${N}u + ${J}u)) & 0x01010101u) << 2u);
  //!end
  //!end
  return q;
}

// The scales minus 32 of the lane's value vectors 4n + m (sc[n][m]), as values: scales 4m .. 4m + 3 are the bytes
// of word m, the low 4 bits from nibble m / 2 of scale word m % 2, the top 2 from bits 2m, 2m + 1 of each byte of
// scale word 2
fn q3_scales(u: Unit) -> array<vec4<f32>, 2> {
  let a0 = u.tail[0];
  let a1 = u.tail[1];
  let a2 = u.tail[2];
  let s0 = bytes_unsigned((a0 & 0x0F0F0F0Fu) | ((a2 & 0x03030303u) << 4u), 32.0);
  let s1 = bytes_unsigned((a1 & 0x0F0F0F0Fu) | (((a2 >> 2u) & 0x03030303u) << 4u), 32.0);
  let s2 = bytes_unsigned(((a0 >> 4u) & 0x0F0F0F0Fu) | (((a2 >> 4u) & 0x03030303u) << 4u), 32.0);
  let s3 = bytes_unsigned(((a1 >> 4u) & 0x0F0F0F0Fu) | (((a2 >> 6u) & 0x03030303u) << 4u), 32.0);
  return array<vec4<f32>, 2>(lane_scales(s0, s1, u.upper), lane_scales(s2, s3, u.upper));
}

// The lane's values: its quants (offset 4) under its scales and d, as the reader's values include makes them
// (quant_k_scale_dot.wgsl: f32; quant_k_scale_i8.wgsl: int8)
fn unit_values(u: Unit) -> Values {
  return k_scale_values(q3_words(u), 4u, q3_scales(u), unpack2x16float(u.tail[3]).x);
}
