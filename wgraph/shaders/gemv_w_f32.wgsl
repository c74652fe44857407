// A 16-byte load of f32 weights (4 per load) as vec4<f32>s: the GEMV's weight reader for f32 weights.
const W_PER_LOAD: u32 = 4u;
const PARTS: u32 = 1u;  // vec4<f32> per load

fn widen(word: vec4<f32>) -> array<vec4<f32>, 1> {
  return array<vec4<f32>, 1>(word);
}
