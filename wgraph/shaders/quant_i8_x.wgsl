// x rounded to int8 for the integer-dot block readers (quant_lanes_*_i8dot.wgsl, tuning candidates): a lane's
// XV vectors of x on one scale of their own (max |x| / 127; llama.cpp rounds x per 32), once for its FT rows.
// The rounding puts a dot ~1e-3 (relative) off the float sum; a non-finite x gives a meaningless one.
struct XPart {
  q: array<u32, XV>,     // x vector i as 4 int8 values
  sums: array<i32, XV>,  // the sum of vector i's int8 values
  step: f32,             // x = step * q
}

//!include quant_pack_i8.wgsl

fn x_part(xs: array<vec4<f32>, XV>) -> XPart {
  var a = abs(xs[0]);
  for (var i = 1u; i < XV; i++) {
    a = max(a, abs(xs[i]));
  }
  let m = max(max(a.x, a.y), max(a.z, a.w));
  let inv = select(127.0 / m, 0.0, m == 0.0);
  var p: XPart;
  p.step = m * (1.0 / 127.0);
  for (var i = 0u; i < XV; i++) {
    p.q[i] = pack_i8(xs[i] * inv);
    p.sums[i] = dot4I8Packed(p.q[i], 0x01010101u);
  }
  return p;
}
