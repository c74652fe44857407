// Q6_K lanes for quant_gemv.wgsl: 210-byte super-blocks of 256 weights: ql (128 bytes: low 4 bits), qh (64:
// high 2 bits), 16 int8 scales (one a 16 weights), f16 d; w = d * scale * (q - 32). 210 bytes: an odd block
// starts 2 bytes into a word, so a lane reads each 4-byte field as the funnel of the two words it spans (two
// loads). Half n of a block (weights 128n ..): ql word 64n + 4t (A) holds weights 128n + 4t .. + 3 in its low
// nibbles and the same + 64 in its high ones, ql word 64n + 32 + 4t (B) the same + 32 and + 96; qh word
// 32n + 4t (H) their top bits (bits 0-1, 2-3, 4-5, 6-7 of each byte). Lane t of a block's 8 takes A, B, H of
// both halves: x vectors 32n + 8m + t (m = 0..3: A low, B low, A high, B high), i.e. vectors t + 8i, i = 4n + m
// (neighbours across the lanes: quant_x_interleaved.wgsl); their scales are bytes 8n + 2m + t / 4.
const_assert LPB == 8u && XV == 8u;

//!include quant_x_interleaved.wgsl
//!include quant_x_plain.wgsl
//!include quant_k_scale_dot.wgsl
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

// The 6-bit quants of 4 weights minus 32: bits 0-3 of each byte of `low`, bits 4-5 of each byte of `high`
fn q6(low: u32, high: u32) -> vec4<f32> {
  return bytes_unsigned((low & 0x0F0F0F0Fu) | (high & 0x30303030u), 32.0);
}

fn unit_values(u: Unit) -> Values {
  var v: array<vec4<f32>, 8>;
  var sc: array<vec4<f32>, 2>;
  //!repeat N 2
  let a$N = u.q[3 * $N];
  let b$N = u.q[3 * $N + 1];
  let h$N = u.q[3 * $N + 2];
  v[4 * $N] = q6(a$N, h$N << 4u);
  v[4 * $N + 1] = q6(b$N, h$N << 2u);
  v[4 * $N + 2] = q6(a$N >> 4u, h$N);
  v[4 * $N + 3] = q6(b$N >> 4u, h$N >> 2u);
  let s$N = bytes_signed(u.tail[2 * $N]);       // scale bytes 8n .. 8n + 3
  let r$N = bytes_signed(u.tail[2 * $N + 1]);   // 8n + 4 .. 8n + 7
  sc[$N] = lane_scales(s$N, r$N, u.upper);
  //!end
  return Values(v, sc, unpack2x16float(u.tail[4]).x);
}
