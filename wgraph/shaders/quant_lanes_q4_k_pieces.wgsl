// Q4_K by 16-byte pieces for quant_gemv.wgsl, x staged (quant_gemv_core.wgsl): lane t of a 144-byte super-block's
// 8 takes quant words 4t .. 4t + 3 (one 16-byte load) and the 16-byte header (d, dmin, the 12 scale bytes; the
// block's 8 lanes load it alike). quant_lanes_q4_k.wgsl's lanes load 4 separate quant words (t, t + 8, ..) and
// decode all 8 scales and mins per lane and row; here a lane's words lie in one chunk c = t / 2 of 64 weights, so
// it decodes 2. Quant word 8c + 4h + l (h = t % 2, l < 4): low nibbles are weights 64c + 16h + 4l .. + 3 of
// sub-block 2c (x vector 16c + 4h + l), high nibbles the same + 32 of sub-block 2c + 1 (vector 16c + 8 + 4h + l).
// Weight d * sc * q - dmin * mn, summed as d * (sc_a * lo + sc_b * hi) - dmin * (mn_a * sum x_a + mn_b * sum x_b).
// One row of x or several: the quants are dequantized in unit_dot, per row.
const_assert LPB == 8u && XV == 8u;
const STAGE_X: u32 = 1u;

//!include quant_fma_dot.wgsl

// x vector i of lane t's 8: 4 of sub-block 2c (i < 4), then the 4 of sub-block 2c + 1 the same words hold
fn lane_vector(t: u32, i: u32) -> u32 {
  return 16u * (t / 2u) + 4u * (t % 2u) + 8u * (i / 4u) + i % 4u;
}

// The 8 lanes of a block read vectors 16c + 4h + 8j + l at once (c, h theirs; j, l the same): bank group 4h + l
// for all 4 c; XORing c into the low 2 bits makes it 4h + (l ^ c), 8 groups (within c's aligned run of 4).
fn stage_at(v: u32) -> u32 {
  return v ^ ((v / 16u) % 4u);
}

struct Unit {
  head: vec4<u32>,  // d | dmin, then the scale bytes 0-3, 4-7, 8-11
  q: vec4<u32>,     // quant words 4t .. 4t + 3
  c: u32,           // the chunk: sub-blocks 2c, 2c + 1
}

fn load_unit(b: u32, t: u32) -> Unit {
  let a = b * (BLOCK_BYTES / 16u);  // the block in 16-byte words: the header, then 8 pieces
  return Unit(word4(a), word4(a + 1u + t), t / 2u);
}

alias Values = Unit;

fn unit_values(u: Unit) -> Values {
  return u;
}

// The sums of the lane's x over its two sub-blocks' vectors (0-3 and 4-7), which the mins multiply
alias XPart = vec2<f32>;

fn x_part(xs: array<vec4<f32>, XV>) -> XPart {
  let a = (xs[0] + xs[1]) + (xs[2] + xs[3]);
  let b = (xs[4] + xs[5]) + (xs[6] + xs[7]);
  return vec2<f32>(dot(a, vec4<f32>(1.0)), dot(b, vec4<f32>(1.0)));
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  var lo = 0.0;
  var hi = 0.0;
  //!repeat I 4
  lo = fma_dot(nibbles_low(v.q[$I], 0.0), xs[$I], lo);
  hi = fma_dot(nibbles_high(v.q[$I], 0.0), xs[$I + 4], hi);
  //!end
  let a = vec2<f32>(scale_min_k4(v.head.y, v.head.z, v.head.w, 2u * v.c));
  let b = vec2<f32>(scale_min_k4(v.head.y, v.head.z, v.head.w, 2u * v.c + 1u));
  let dm = unpack2x16float(v.head.x);
  return dm.x * (a.x * lo + b.x * hi) - dm.y * (a.y * xp.x + b.y * xp.y);
}
