// Q2_K lanes for quant_gemv.wgsl: 84-byte super-blocks of 256 weights, always on a word: 16 scale bytes (sub-block
// s of 16 weights: its scale sc in the low nibble of byte s, its min mn in the high), qs (64 bytes: 2 bits a
// weight, laid out as Q3_K's), f16 d and dmin; w = d * sc * q - dmin * mn. Lane t of a block's 8 takes qs word
// 8n + t of each half n: value vector i = 4n + j (bits 2j, 2j + 1 of each byte) multiplies x vector t + 8i
// (quant_x_interleaved.wgsl) under sub-block 8n + 2j + t / 4's scale and min (quant_k_min_dot.wgsl).
const_assert LPB == 8u && XV == 8u;

//!include quant_x_interleaved.wgsl
//!include quant_x_sums.wgsl
//!include quant_k_min_dot.wgsl

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

fn unit_values(u: Unit) -> Values {
  var v: array<vec4<f32>, 8>;
  var sc: array<vec4<f32>, 2>;
  var mn: array<vec4<f32>, 2>;
  //!repeat N 2
  //!repeat J 4
  v[4 * $N + $J] = bytes_unsigned((u.q[$N] >> (2u * ${J}u)) & 0x03030303u, 0.0);
  //!end
  sc[$N] = lane_scales(bytes_unsigned(u.s[2 * $N] & 0x0F0F0F0Fu, 0.0), bytes_unsigned(u.s[2 * $N + 1] & 0x0F0F0F0Fu, 0.0),
                       u.upper);
  mn[$N] = lane_scales(bytes_unsigned((u.s[2 * $N] >> 4u) & 0x0F0F0F0Fu, 0.0),
                       bytes_unsigned((u.s[2 * $N + 1] >> 4u) & 0x0F0F0F0Fu, 0.0), u.upper);
  //!end
  return Values(v, sc, mn, unpack2x16float(u.dm));
}
