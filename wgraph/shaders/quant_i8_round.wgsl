// Rounding x to int8 as it is staged (quant_x_i8_staged.wgsl: a lane a 32-weight block; quant_x_i8_staged_k.wgsl:
// 8 lanes a 256-weight super-block): one thread takes a 32-weight block of a row of x, times norm_w with the fused
// norm (x^2 summed first), step = max |x'| / 127 (llama.cpp rounds x per 32 likewise; 2^-126 at least, below), the
// values round(x' / step) as 8 words of 4 int8. The rounding puts a dot ~1e-3 (relative) off the float sum; a
// non-finite x' makes the block's step NaN or inf, and the outputs it feeds NaN.

struct I8Block {
  q: array<u32, 8>,  // values 4i .. 4i + 3 in word i
  step: f32,         // x' = step * value
  sum: f32,          // the sum of the 32 values (exact: |sum| <= 4064)
  sq: f32,           // the sum of x^2 (the norm's; 0 without it)
}

// Round to the nearest int8 by adding 1.5 * 2^23: the float's low byte is then the integer's (two's complement)
// for |v| < 2^22; no float-to-int conversion (a quarter of the FMA rate).
fn pack_i8(v: vec4<f32>) -> u32 {
  let b = bitcast<vec4<u32>>(v + vec4<f32>(12582912.0)) & vec4<u32>(0xFFu);
  return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}

// The exact float of an integer |i| < 2^22 (an integer dot of int8 values) the same way back: an integer add,
// which the device may fold into the dot's accumulator, and a float add, where a conversion takes a quarter of
// the FMA rate
fn exact_f32(i: vec4<i32>) -> vec4<f32> {
  return bitcast<vec4<f32>>(bitcast<vec4<u32>>(i) + vec4<u32>(0x4B400000u)) - vec4<f32>(12582912.0);
}

// The 32-weight block `blk` of row r of the chunk (rows row0 ..; zeros from row `rows` on and past the row's end)
fn round_block(row0: u32, r: u32, rows: u32, blk: u32) -> I8Block {
  let xrow = params.k / 4u;
  var xs: array<vec4<f32>, 8>;
  var out: I8Block;
  if (r < rows && blk * 8u < xrow) {
    //!repeat I 8
    xs[$I] = x[(row0 + r) * xrow + blk * 8u + ${I}u];
    //!end
    if (HAS_NORM) {
      //!repeat I 8
      out.sq += dot(xs[$I], xs[$I]);
      xs[$I] = xs[$I] * norm_w[blk * 8u + ${I}u];
      //!end
    }
  }
  var a = abs(xs[0]);
  var f = xs[0] * (1.0 / 1024.0);
  //!repeat I 7
  a = max(a, abs(xs[$I + 1]));
  f = fma(xs[$I + 1], vec4<f32>(1.0 / 1024.0), f);
  //!end
  // max passes over a NaN (NVIDIA returns the other operand) and pack_i8 makes it an int8: the block's sum, scaled
  // so that 32 finite x' cannot overflow it, is finite unless an x' is not (NaN or inf); then m, so the step, is a
  // NaN (made from the sum's bits: a constant NaN may be folded) and every output the block feeds is NaN (the float
  // reference of the rounding: step = inf / 127, x / step = NaN). An inf step was not enough: inv = 0 makes
  // x' * inv NaN for an inf x', whose low byte pack_i8 keeps (0 on lavapipe, 0xFF = -1 from NVIDIA's 0x7FFFFFFF),
  // so inf * (a non-zero integer dot) gave +-inf outputs; a NaN step makes the values, whatever they round to,
  // irrelevant. The test is on the float's exponent bits, which a compiler may not fold as it may a NaN compare.
  let s = f.x + f.y + f.z + f.w;
  let non_finite = (bitcast<u32>(s) & 0x7F800000u) == 0x7F800000u;
  let m = select(max(max(a.x, a.y), max(a.z, a.w)), bitcast<f32>(bitcast<u32>(s) | 0x7FC00000u), non_finite);
  // The step is never below f32's smallest normal, 2^-126: a device may flush subnormals to zero (Vulkan allows
  // it; the H100 does), where a step m / 127 below it (m < 127 * 2^-126 ~ 1.5e-36, a normal m) read as 0 and the
  // block's outputs were 0 (float64: ~1e-36). For m < 255 * 2^-127 (a bits test: a NaN m stays out; the margin
  // keeps m * f32(1 / 127) normal above it) the step is 2^-126 and the values round(x' * 2^126), |value| < 127.5:
  // ~m / 1.2e-38 levels each side, an x' off by at most half of f32's smallest normal (a flushing device's f32
  // resolution). Above it 127 / m <= 8.5e37 stays finite. The readers multiply the step last: step * (d * dot).
  let tiny = bitcast<u32>(m) < 0x03FF0000u;
  let inv = select(127.0 / m, bitcast<f32>(0x7E800000u), tiny);
  var sum = 0;
  //!repeat I 8
  out.q[$I] = pack_i8(xs[$I] * inv);
  sum += dot4I8Packed(out.q[$I], 0x01010101u);
  //!end
  out.step = select(m * (1.0 / 127.0), bitcast<f32>(0x00800000u), tiny);
  out.sum = f32(sum);
  return out;
}
