// Q4_1 slices for quant_gemv.wgsl: 20-byte blocks (d f16, m f16, 16 quant bytes), always word-aligned. Quant
// words as Q4_0's, values q (0..15); the block's min m multiplies the sum of x over the slice.
const SLICES_PER_BLOCK: u32 = 4u / SLICE_WORDS;
const X_VECS: u32 = 2u * SLICE_WORDS;
const HAS_MIN: bool = true;
const_assert 4u % SLICE_WORDS == 0u;

fn load_slice(b: u32, part: u32) -> Slice {
  let head = blocks[b * (BLOCK_BYTES / 4u)];
  let q0 = b * (BLOCK_BYTES / 4u) + 1u + part * SLICE_WORDS;
  var sl: Slice;
  //!repeat I SLICE_WORDS
  sl.words[$I] = blocks[q0 + ${I}u];
  //!end
  let dm = unpack2x16float(head);
  sl.scale = vec2<f32>(dm.x);
  sl.offset = vec2<f32>(dm.y);
  return sl;
}

fn slice_values(sl: Slice) -> array<vec4<f32>, X_VECS> {
  return array<vec4<f32>, X_VECS>(
    //!repeat I SLICE_WORDS
    nibbles_low(sl.words[$I], 0.0),
    //!end
    //!repeat I SLICE_WORDS
    nibbles_high(sl.words[$I], 0.0),
    //!end
  );
}

fn slice_x(blk: u32, part: u32, i: u32) -> u32 {
  return 8u * blk + part * SLICE_WORDS + select(i + 4u - SLICE_WORDS, i, i < SLICE_WORDS);
}
