// Decoding GGML quants (wgraph/ggml_blocks.py) from u32 words: WGSL has no u8 or u16 loads, and f16 scales are
// widened with unpack2x16float (no shader-f16 needed).
//
// A word's quants become exact f32 values without an int-to-float conversion (NVIDIA GPUs convert at a
// quarter of the FMA rate, and a 4-bit GEMV would be bound by it): each field is ORed into the mantissa of
// 1.0 at the bit position p where it sits (fields at bits 0-7 and 8-15 of the word and of its upper half),
// giving 1 + q * 2^(p - 23); fma(v, 2^(23 - p), -(2^(23 - p) + offset)) = q - offset exactly.
const MANTISSA_ONE: u32 = 0x3F800000u;
// 1.0's bits as the ORs below use them, set by the kernel (quant_gemv_core.wgsl's gemv) from a uniform, so the
// compiler cannot fold it: with the mask and 1.0 both immediates, NVIDIA's compiler emits an AND and an OR per
// weight; with 1.0 in a register it fuses them into one LOP3 (benchmarks/pipeline_sass.py shows the loop).
var<private> one_bits: u32 = MANTISSA_ONE;

// The low nibbles of bytes 0..3 of `v` (weights i..i+3 of a Q4 quant word), minus `offset`.
fn nibbles_low(v: u32, offset: f32) -> vec4<f32> {
  let fields = vec4<u32>(v, v, v >> 16u, v >> 16u) & vec4<u32>(0xFu, 0xF00u, 0xFu, 0xF00u);
  let scale = vec4<f32>(8388608.0, 32768.0, 8388608.0, 32768.0);
  return fma(bitcast<vec4<f32>>(fields | vec4<u32>(one_bits)), scale, -(scale + offset));
}

// The high nibbles of bytes 0..3 of `v` (weights i+16..i+19 of a Q4_0 / Q4_1 quant word), minus `offset`.
fn nibbles_high(v: u32, offset: f32) -> vec4<f32> {
  let fields = vec4<u32>(v, v, v >> 16u, v >> 16u) & vec4<u32>(0xF0u, 0xF000u, 0xF0u, 0xF000u);
  let scale = vec4<f32>(524288.0, 2048.0, 524288.0, 2048.0);
  return fma(bitcast<vec4<f32>>(fields | vec4<u32>(one_bits)), scale, -(scale + offset));
}

// Bytes 0..3 of `v` as signed int8 values (a Q8_0 quant word): flipping the sign bit makes them q + 128.
fn bytes_signed(v: u32) -> vec4<f32> {
  let u = v ^ 0x80808080u;
  let fields = vec4<u32>(u, u, u >> 16u, u >> 16u) & vec4<u32>(0xFFu, 0xFF00u, 0xFFu, 0xFF00u);
  let scale = vec4<f32>(8388608.0, 32768.0, 8388608.0, 32768.0);
  return fma(bitcast<vec4<f32>>(fields | vec4<u32>(one_bits)), scale, -(scale + 128.0));
}

// Bytes 0..3 of `v` as unsigned values minus `offset` (Q4_K's scale and min bytes; Q6_K's 6-bit quants).
fn bytes_unsigned(v: u32, offset: f32) -> vec4<f32> {
  let fields = vec4<u32>(v, v, v >> 16u, v >> 16u) & vec4<u32>(0xFFu, 0xFF00u, 0xFFu, 0xFF00u);
  let scale = vec4<f32>(8388608.0, 32768.0, 8388608.0, 32768.0);
  return fma(bitcast<vec4<f32>>(fields | vec4<u32>(one_bits)), scale, -(scale + offset));
}

// IQ4_NL's and IQ4_XS's 16 non-uniform values (llama.cpp's kvalues_iq4nl: -127, -104, .. 89, 113) as int8, 4 a
// word: value q is byte q % 4 of word q / 4.
const IQ4_VALUES = array<u32, 4>(0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u);

// The table values of 4 nibbles (0..15): the word by two selects (no indexed array: a dynamically indexed one
// may live in slow local memory), the byte to the top, arithmetic shift down.
fn iq4_values(q: vec4<u32>) -> vec4<f32> {
  let odd = (q & vec4<u32>(4u)) != vec4<u32>(0u);
  let words = select(select(vec4<u32>(IQ4_VALUES[0]), vec4<u32>(IQ4_VALUES[1]), odd),
                     select(vec4<u32>(IQ4_VALUES[2]), vec4<u32>(IQ4_VALUES[3]), odd), q >= vec4<u32>(8u));
  return vec4<f32>(bitcast<vec4<i32>>(words << ((vec4<u32>(3u) - (q & vec4<u32>(3u))) * 8u)) >> vec4<u32>(24u));
}

// The table values of the low (IQ4 weights i .. i + 3 of a quant word) and high nibbles (i + 16 ..) of `v`'s bytes
fn iq4_low(v: u32) -> vec4<f32> {
  return iq4_values((vec4<u32>(v) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(15u));
}

fn iq4_high(v: u32) -> vec4<f32> {
  return iq4_values((vec4<u32>(v) >> vec4<u32>(4u, 12u, 20u, 28u)) & vec4<u32>(15u));
}

// 1 or -1 for 4 weights from their sign bits first .. first + 3 of `bits` (a set bit: minus)
fn signs4(bits: u32, first: u32) -> vec4<f32> {
  let minus = ((vec4<u32>(bits) >> (vec4<u32>(0u, 1u, 2u, 3u) + first)) & vec4<u32>(1u)) == vec4<u32>(1u);
  return select(vec4<f32>(1.0), vec4<f32>(-1.0), minus);
}

// The signs of weights 0-3 (half 0) or 4-7 (half 1) of a group of 8 from their 7-bit code (IQ2_XXS, IQ2_XS,
// IQ3_XXS: the 8th sign makes the count of minus signs even, llama.cpp's ksigns_iq2xs table, computed)
fn iq_signs(code: u32, half: u32) -> vec4<f32> {
  return signs4(code | ((countOneBits(code) & 1u) << 7u), 4u * half);
}

// Bits 0-3 of `x` at bit 0 of bytes 0-3 (x * (1 + 2^7 + 2^14 + 2^21): the four copies do not overlap): the
// fifth bits of 4 neighbouring Q5_0 / Q5_1 weights, to be shifted to bit 4 of their bytes.
fn spread4(x: u32) -> u32 {
  return ((x & 0xFu) * 0x00204081u) & 0x01010101u;
}

// The 4 bytes that start 2 bytes into word `lo` (its upper half, then the lower half of the next word, `hi`)
fn funnel16(lo: u32, hi: u32) -> u32 {
  return (lo >> 16u) | (hi << 16u);
}

// The scales of a lane's 4 sub-blocks of 16 in half of a K-quant block with 16 (Q2_K, Q3_K, Q6_K), from the
// half's 8 scale bytes as values (s: bytes 0-3, r: 4-7): the even bytes (weights 0-15 of each 32, the lanes
// t < 4 of a block's 8) or the odd (16-31: `upper`, t >= 4)
fn lane_scales(s: vec4<f32>, r: vec4<f32>, upper: bool) -> vec4<f32> {
  return select(vec4<f32>(s.x, s.z, r.x, r.z), vec4<f32>(s.y, s.w, r.y, r.w), upper);
}

// Quant word i of an 18- or 34-byte block (Q4_0, Q8_0) from words a = w + i and b = w + i + 1, w the word
// holding its d: an odd block's d is the upper half of word w and its quants start on the next word (b); an
// even block's quants start mid-word (the upper half of a and the lower half of b).
fn quant_word(a: u32, b: u32, odd: bool) -> u32 {
  return select(funnel16(a, b), b, odd);
}

// The f16 d of such a block from word `head`, the one holding it: its lower half (an even block) or upper (odd).
fn block_d(head: u32, odd: bool) -> f32 {
  return unpack2x16float(select(head, head >> 16u, odd)).x;
}

// Q4_K's 6-bit scale and min of sub-block j (0..7) from the 12 scale bytes s0 (bytes 0-3), s1 (4-7) and
// s2 (8-11): j < 4 keeps them in the low 6 bits of bytes j and j + 4; j >= 4 in the nibbles of byte j + 4
// with the top 2 bits in bytes j - 4 and j.
fn scale_min_k4(s0: u32, s1: u32, s2: u32, j: u32) -> vec2<u32> {
  let s = 8u * (j % 4u);
  let low = vec2<u32>((s0 >> s) & 63u, (s1 >> s) & 63u);
  let high = vec2<u32>(((s2 >> s) & 15u) | (((s0 >> (s + 6u)) & 3u) << 4u),
                       ((s2 >> (s + 4u)) & 15u) | (((s1 >> (s + 6u)) & 3u) << 4u));
  return select(high, low, j < 4u);
}
