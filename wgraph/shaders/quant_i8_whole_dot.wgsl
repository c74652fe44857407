// The integer dot of a whole 32-weight block's 8 quant words (int8 or 0..15 values, 4 a word: weights 0-15 in
// `lo`, 16-31 in `hi`) with the staged int8 x of quant_x_i8_staged.wgsl, as two chains of 4 dot4I8Packed (one
// instruction each where the device has it: IDP4A on the H200)
fn i8_block_dot(lo: vec4<u32>, hi: vec4<u32>, xp: XPart) -> i32 {
  let a = dot4I8Packed(lo.x, xp.lo.x) + dot4I8Packed(lo.y, xp.lo.y) + dot4I8Packed(lo.z, xp.lo.z)
          + dot4I8Packed(lo.w, xp.lo.w);
  let b = dot4I8Packed(hi.x, xp.hi.x) + dot4I8Packed(hi.y, xp.hi.y) + dot4I8Packed(hi.z, xp.hi.z)
          + dot4I8Packed(hi.w, xp.hi.w);
  return a + b;
}
