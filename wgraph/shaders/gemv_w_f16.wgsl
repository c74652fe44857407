// A 16-byte load of f16 weights (8 per load, read as vec4<u32>) widened to f32 by unpack2x16float: the GEMV's
// weight reader for f16 weights; no shader-f16 needed.
const W_PER_LOAD: u32 = 8u;
const PARTS: u32 = 2u;  // vec4<f32> per load

fn widen(word: vec4<u32>) -> array<vec4<f32>, 2> {
  return array<vec4<f32>, 2>(vec4<f32>(unpack2x16float(word.x), unpack2x16float(word.y)),
                             vec4<f32>(unpack2x16float(word.z), unpack2x16float(word.w)));
}
