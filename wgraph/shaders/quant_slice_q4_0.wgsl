// Q4_0 slices for quant_gemv.wgsl: 18-byte blocks (d f16, 16 quant bytes), so a block starts on a word or
// mid-word. A slice is SLICE_WORDS of a block's 4 quant words; quant word i holds weights 4i..4i+3 (low
// nibbles) and 16+4i..16+4i+3 (high nibbles), each as q - 8.
const SLICES_PER_BLOCK: u32 = 4u / SLICE_WORDS;
const X_VECS: u32 = 2u * SLICE_WORDS;
const HAS_MIN: bool = false;
const_assert 4u % SLICE_WORDS == 0u;

// Block b (counted over the whole matrix), slice `part`.
fn load_slice(b: u32, part: u32) -> Slice {
  let byte = b * BLOCK_BYTES;
  let head = blocks[byte / 4u];
  let aligned = (byte & 2u) != 0u;  // d is the upper half of `head`, and the quants start on a word
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
    nibbles_low(sl.words[$I], 8.0),
    //!end
    //!repeat I SLICE_WORDS
    nibbles_high(sl.words[$I], 8.0),
    //!end
  );
}

// The vec4 of an x row that value vector i of slice `part` of block `blk` (counted within the row) multiplies.
fn slice_x(blk: u32, part: u32, i: u32) -> u32 {
  return 8u * blk + part * SLICE_WORDS + select(i + 4u - SLICE_WORDS, i, i < SLICE_WORDS);
}
