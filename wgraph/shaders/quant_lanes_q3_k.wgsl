// Q3_K lanes for quant_gemv.wgsl: 110-byte super-blocks of 256 weights: hmask (32 bytes: each weight's third
// bit), qs (64: its low 2 bits), 12 bytes of 6-bit scales (16, one a 16 weights), f16 d; w = d * (scale - 32) *
// (q - 4). Half n of a block (weights 128n ..): qs byte 32n + l holds weights 128n + 32j + l in bits 2j, 2j + 1
// (j = 0..3), hmask byte l their third bits at bit 4n + j. Lane t of a block's 8 takes l = 4t .. 4t + 3: qs word
// 8n + t of each half and hmask word t; value vector i = 4n + j multiplies x vector t + 8i (neighbours across
// the lanes: quant_x_interleaved.wgsl), under scale 8n + 2j + t / 4. 110 bytes: an odd block starts 2 bytes
// into a word, so each field is read as Q6_K's reader reads its fields (quant_bytes4.wgsl).
const_assert LPB == 8u && XV == 8u;

//!include quant_x_interleaved.wgsl
//!include quant_x_plain.wgsl
//!include quant_k_scale_dot.wgsl
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

fn unit_values(u: Unit) -> Values {
  var v: array<vec4<f32>, 8>;
  //!repeat N 2
  //!repeat J 4
  v[4 * $N + $J] = bytes_unsigned(((u.q[$N] >> (2u * ${J}u)) & 0x03030303u)
                                  | (((u.h >> (4u * ${N}u + ${J}u)) & 0x01010101u) << 2u), 4.0);
  //!end
  //!end
  // scales 4m .. 4m + 3 as the bytes of word m: the low 4 bits from nibble m / 2 of scale word m % 2, the top 2
  // from bits 2m, 2m + 1 of each byte of scale word 2
  let a0 = u.tail[0];
  let a1 = u.tail[1];
  let a2 = u.tail[2];
  let s0 = bytes_unsigned((a0 & 0x0F0F0F0Fu) | ((a2 & 0x03030303u) << 4u), 32.0);
  let s1 = bytes_unsigned((a1 & 0x0F0F0F0Fu) | (((a2 >> 2u) & 0x03030303u) << 4u), 32.0);
  let s2 = bytes_unsigned(((a0 >> 4u) & 0x0F0F0F0Fu) | (((a2 >> 4u) & 0x03030303u) << 4u), 32.0);
  let s3 = bytes_unsigned(((a1 >> 4u) & 0x0F0F0F0Fu) | (((a2 >> 6u) & 0x03030303u) << 4u), 32.0);
  let sc = array<vec4<f32>, 2>(lane_scales(s0, s1, u.upper), lane_scales(s2, s3, u.upper));
  return Values(v, sc, unpack2x16float(u.tail[3]).x);
}
