// A lane's share of one Q6_K super-block (quant_lanes_q6_k.wgsl's header: the layout, which words lane t takes)
// for the f32 reader and the integer-dot one (quant_lanes_q6_k_i8.wgsl): the A, B, H words of both halves and the
// 20 bytes from byte 192 (the 16 scales, d), each field realigned where the block starts mid-word.
//!include quant_bytes4.wgsl

struct Unit {
  q: array<u32, 6>,      // A, B, H of half 0, then of half 1
  tail: array<u32, 5>,   // bytes 192 .. 211: the scales, then d (and 2 bytes past the block)
  upper: bool,           // t >= 4: the lane's scales are the odd bytes of each pair
}

fn load_unit(b: u32, t: u32) -> Unit {
  let at = b * BLOCK_BYTES;
  var q: array<u32, 6>;
  //!repeat N 2
  q[3 * $N] = bytes4(at + 64u * ${N}u + 4u * t);
  q[3 * $N + 1] = bytes4(at + 64u * ${N}u + 32u + 4u * t);
  q[3 * $N + 2] = bytes4(at + 128u + 32u * ${N}u + 4u * t);
  //!end
  // bytes 192 .. 211 (six words hold them, from whichever word byte 192 falls in)
  let w = (at + 192u) / 4u;
  let odd = (at % 4u) != 0u;
  var raw: array<u32, 6>;
  //!repeat I 6
  raw[$I] = word(w + ${I}u);
  //!end
  var tail: array<u32, 5>;
  //!repeat I 5
  tail[$I] = select(raw[$I], funnel16(raw[$I], raw[$I + 1]), odd);
  //!end
  return Unit(q, tail, t >= 4u);
}

// The lane's 6-bit quants (0..63) of value vector i = 4n + m as the bytes of word i: bits 0-3 from A's or B's
// nibbles (m = 0, 2: A; 1, 3: B; low nibbles for m < 2), bits 4-5 from H's bit pair m of each byte
fn q6_words(u: Unit) -> array<u32, 8> {
  var q: array<u32, 8>;
  //!repeat N 2
  let a$N = u.q[3 * $N];
  let b$N = u.q[3 * $N + 1];
  let h$N = u.q[3 * $N + 2];
  q[4 * $N] = (a$N & 0x0F0F0F0Fu) | ((h$N << 4u) & 0x30303030u);
  q[4 * $N + 1] = (b$N & 0x0F0F0F0Fu) | ((h$N << 2u) & 0x30303030u);
  q[4 * $N + 2] = ((a$N >> 4u) & 0x0F0F0F0Fu) | (h$N & 0x30303030u);
  q[4 * $N + 3] = ((b$N >> 4u) & 0x0F0F0F0Fu) | ((h$N >> 2u) & 0x30303030u);
  //!end
  return q;
}

// The scales of the lane's value vectors 4n + m (sc[n][m]), as values
fn q6_scales(u: Unit) -> array<vec4<f32>, 2> {
  return array<vec4<f32>, 2>(lane_scales(bytes_signed(u.tail[0]), bytes_signed(u.tail[1]), u.upper),
                             lane_scales(bytes_signed(u.tail[2]), bytes_signed(u.tail[3]), u.upper));
}

// The lane's values: its quants (offset 32) under its scales and d, as the reader's values include makes them
// (quant_k_scale_dot.wgsl: f32; quant_k_scale_i8.wgsl: int8)
fn unit_values(u: Unit) -> Values {
  return k_scale_values(q6_words(u), 32u, q6_scales(u), unpack2x16float(u.tail[4]).x);
}
