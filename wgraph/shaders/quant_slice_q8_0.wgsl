// Q8_0 slices for quant_gemv.wgsl: 34-byte blocks (d f16, 32 int8 quants), starting on a word or mid-word.
// A slice is SLICE_WORDS of a block's 8 quant words (4 weights each); its two halves both take the scale d.
const SLICES_PER_BLOCK: u32 = 8u / SLICE_WORDS;
const X_VECS: u32 = SLICE_WORDS;
const HAS_MIN: bool = false;
const_assert 8u % SLICE_WORDS == 0u && SLICE_WORDS >= 2u;

fn load_slice(b: u32, part: u32) -> Slice {
  let byte = b * BLOCK_BYTES;
  let head = blocks[byte / 4u];
  let aligned = (byte & 2u) != 0u;
  let q0 = (byte + 2u) / 4u + part * SLICE_WORDS;
  var sl: Slice;
  //!repeat I SLICE_WORDS
  sl.words[$I] = quant_word(blocks[q0 + ${I}u], blocks[q0 + ${I}u + 1u], aligned);
  //!end
  sl.scale = vec2<f32>(unpack2x16float(select(head, head >> 16u, aligned)).x);
  sl.offset = vec2<f32>(0.0);
  return sl;
}

fn slice_values(sl: Slice) -> array<vec4<f32>, X_VECS> {
  return array<vec4<f32>, X_VECS>(
    //!repeat I SLICE_WORDS
    bytes_signed(sl.words[$I]),
    //!end
  );
}

fn slice_x(blk: u32, part: u32, i: u32) -> u32 {
  return 8u * blk + part * SLICE_WORDS + i;
}
