// Round to the nearest int8 by adding 1.5 * 2^23: the float's low byte is then the integer's (two's complement)
// for |v| < 2^22; no float-to-int conversion (a quarter of the FMA rate).
fn pack_i8(v: vec4<f32>) -> u32 {
  let b = bitcast<vec4<u32>>(v + vec4<f32>(12582912.0)) & vec4<u32>(0xFFu);
  return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}
