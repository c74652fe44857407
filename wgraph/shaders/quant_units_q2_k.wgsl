// A lane's share of one Q2_K super-block (quant_lanes_q2_k.wgsl's header: the layout, which words lane t takes) for
// the f32 reader and the integer-dot one (quant_lanes_q2_k_i8.wgsl): the qs word of each half, the 16 scale bytes,
// d | dmin.

struct Unit {
  q: array<u32, 2>,  // the qs word of half 0, of half 1
  s: array<u32, 4>,  // the scale bytes
  dm: u32,           // d | dmin
  upper: bool,       // t >= 4: the lane's scales are the odd bytes of each pair
}

fn load_unit(b: u32, t: u32) -> Unit {
  let a = b * BLOCK_BYTES / 4u;
  var s: array<u32, 4>;
  //!repeat I 4
  s[$I] = word(a + ${I}u);
  //!end
  return Unit(array<u32, 2>(word(a + 4u + t), word(a + 12u + t)), s, word(a + 20u), t >= 4u);
}

// The lane's 2-bit quants (0..3) of value vector i = 4n + j as the bytes of word i: bits 2j, 2j + 1 of each byte of
// half n's qs word
fn q2_words(u: Unit) -> array<u32, 8> {
  var q: array<u32, 8>;
  //!repeat N 2
  //!repeat J 4
  q[4 * $N + $J] = (u.q[$N] >> (2u * ${J}u)) & 0x03030303u;
  //!end
  //!end
  return q;
}

struct Q2Scales {
  sc: array<vec4<f32>, 2>,  // the scales of the lane's value vectors 4n + m (sc[n][m])
  mn: array<vec4<f32>, 2>,  // their mins
}

// The scales (low nibbles of the scale bytes) and mins (high nibbles) of the lane's value vectors, as values
fn q2_scales(u: Unit) -> Q2Scales {
  var r: Q2Scales;
  //!repeat N 2
  r.sc[$N] = lane_scales(bytes_unsigned(u.s[2 * $N] & 0x0F0F0F0Fu, 0.0), bytes_unsigned(u.s[2 * $N + 1] & 0x0F0F0F0Fu, 0.0),
                         u.upper);
  r.mn[$N] = lane_scales(bytes_unsigned((u.s[2 * $N] >> 4u) & 0x0F0F0F0Fu, 0.0),
                         bytes_unsigned((u.s[2 * $N + 1] >> 4u) & 0x0F0F0F0Fu, 0.0), u.upper);
  //!end
  return r;
}
