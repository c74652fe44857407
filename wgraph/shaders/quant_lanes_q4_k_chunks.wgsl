// Q4_K by chunks for quant_gemv.wgsl, x staged (quant_gemv_core.wgsl): lane t of a 144-byte super-block's 4
// takes its chunk t of 64 weights, sub-blocks 2t (the low nibbles of quant words 8t .. 8t + 7) and 2t + 1 (their
// high nibbles): two 16-byte loads, and the 16-byte header (d, dmin, the 12 scale bytes), which the block's 4
// lanes load alike. quant_lanes_q4_k.wgsl's 8 lanes a block load 4 separate quant words each and decode all 8
// scales and mins per lane and row; here a lane decodes its 2. A chunk is 16 x vectors, too many to read from x
// itself lane by lane (each load of a warp would touch a line per lane), hence the stage. Quant word 8t + l:
// low nibbles are weights 64t + 4l .. + 3 (the lane's x vector l), high nibbles the same + 32 (vector 8 + l).
// Weight d * sc * q - dmin * mn, summed as d * (sc_a * lo + sc_b * hi) - dmin * (mn_a * sum x_a + mn_b * sum x_b).
// One row of x or several: the quants are dequantized in unit_dot, per row.
const_assert LPB == 4u && XV == 16u;
//!include quant_x_contiguous.wgsl

//!include quant_fma_dot.wgsl

struct Unit {
  head: vec4<u32>,  // d | dmin, then the scale bytes 0-3, 4-7, 8-11
  q: array<vec4<u32>, 2>,  // quant words 8c .. 8c + 3 and 8c + 4 .. 8c + 7 of the lane's chunk c
  c: u32,
}

fn load_unit(b: u32, t: u32) -> Unit {
  let a = b * (BLOCK_BYTES / 16u);  // the block in 16-byte words: the header, then 2 a chunk
  return Unit(word4(a), array<vec4<u32>, 2>(word4(a + 1u + 2u * t), word4(a + 2u + 2u * t)), t);
}

alias Values = Unit;

fn unit_values(u: Unit) -> Values {
  return u;
}

// The sums of the lane's x over its two sub-blocks (vectors 0-7 and 8-15), which the mins multiply
alias XPart = vec2<f32>;

fn x_part(xs: array<vec4<f32>, XV>) -> XPart {
  var a = xs[0];
  var b = xs[8];
  //!repeat I 7
  a += xs[$I + 1];
  b += xs[$I + 9];
  //!end
  return vec2<f32>(dot(a, vec4<f32>(1.0)), dot(b, vec4<f32>(1.0)));
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  var lo = 0.0;
  var hi = 0.0;
  //!repeat I 8
  lo = fma_dot(nibbles_low(v.q[$I / 4][$I % 4], 0.0), xs[$I], lo);
  hi = fma_dot(nibbles_high(v.q[$I / 4][$I % 4], 0.0), xs[$I + 8], hi);
  //!end
  let a = vec2<f32>(scale_min_k4(v.head.y, v.head.z, v.head.w, 2u * v.c));
  let b = vec2<f32>(scale_min_k4(v.head.y, v.head.z, v.head.w, 2u * v.c + 1u));
  let dm = unpack2x16float(v.head.x);
  return dm.x * (a.x * lo + b.x * hi) - dm.y * (a.y * xp.x + b.y * xp.y);
}
