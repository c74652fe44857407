// What argmax and sample share: the (value, index) order of argmax and the ordered u32 key of an f32.
// NaN is tested by is_nan.wgsl's is_nan_f32 (on the bits), which the including kernel brings: argmax and
// argmax_merge include it, sample through elementwise_math.wgsl (a file included twice is a load error).

const NO_INDEX: u32 = 0xffffffffu;  // "no candidate yet": beaten by anything

// does (v, i) come before (w, j) in argmax's order? NaN first, then larger values, then lower indices
fn beats(v: f32, i: u32, w: f32, j: u32) -> bool {
  if (i == NO_INDEX || j == NO_INDEX) {
    return j == NO_INDEX && i != NO_INDEX;
  }
  let nv = is_nan_f32(v);
  if (nv != is_nan_f32(w)) {
    return nv;
  }
  if (nv || v == w) {
    return i < j;
  }
  return v > w;
}

// a u32 whose unsigned order is the float order of v (negative floats reversed, sign bit flipped); -0 takes
// +0's key, as the two are equal values
fn order_key(v: f32) -> u32 {
  let b = select(bitcast<u32>(v), 0u, bitcast<u32>(v) == 0x80000000u);
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}
