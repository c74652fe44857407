// Q4_K slices for quant_gemv.wgsl: 144-byte super-blocks of 256 weights read as 9 16-byte words (a header of
// d, dmin and 12 scale bytes, then 8 of quants). Quant word w (0..31) sits in chunk c = w / 8: its low
// nibbles are weights 64c + 4(w % 8) + 0..3 of sub-block 2c, its high nibbles the same + 32, of sub-block
// 2c + 1. A slice is SLICE_WORDS words of one chunk; each half takes its sub-block's scale d * sc and min
// -dmin * mn.
const SLICES_PER_BLOCK: u32 = 32u / SLICE_WORDS;
const X_VECS: u32 = 2u * SLICE_WORDS;
const HAS_MIN: bool = true;
const_assert 4u % SLICE_WORDS == 0u;

fn load_slice(b: u32, part: u32) -> Slice {
  let head = blocks[b * (BLOCK_BYTES / 16u)];
  let w0 = part * SLICE_WORDS;
  let quants = blocks[b * (BLOCK_BYTES / 16u) + 1u + w0 / 4u];
  var sl: Slice;
  //!repeat I SLICE_WORDS
  sl.words[$I] = quants[(w0 + ${I}u) % 4u];
  //!end
  let c = w0 / 8u;
  let low = scale_min_k4(head.y, head.z, head.w, 2u * c);
  let high = scale_min_k4(head.y, head.z, head.w, 2u * c + 1u);
  let dm = unpack2x16float(head.x);
  sl.scale = dm.x * vec2<f32>(f32(low.x), f32(high.x));
  sl.offset = -dm.y * vec2<f32>(f32(low.y), f32(high.y));
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
  let w0 = part * SLICE_WORDS;
  return 64u * blk + 16u * (w0 / 8u) + w0 % 8u + select(i + 8u - SLICE_WORDS, i, i < SLICE_WORDS);
}
