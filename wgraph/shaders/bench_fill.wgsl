// Seeded pseudo-random weights made on the GPU (the bench's models and GEMV shapes: no gigabytes of host
// randoms through the queue). Element j of the filled range holds (h(j) >> 21 - 1024) / 1024 * scale with
// h = lowbias32(j ^ lowbias32(seed)): 2048 levels in [-1, 1) times a power of two, so f32 and f16 hold every
// value exactly (wgraph/bench/weights.py computes the same values with numpy and torch). Word i of the range
// holds element i (f32), or elements 2i (low half) and 2i + 1 (f16).
struct FillParams {
  first_word: u32,  // where the range starts in the tensor (u32 words)
  words: u32,
  seed: u32,
  scale: f32,
  halves: u32,      // 1: f16 elements, two per word
}

@group(0) @binding(0) var<uniform> params: FillParams;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;

fn lowbias32(v: u32) -> u32 {
  var x = v;
  x ^= x >> 16u;
  x *= 0x7feb352du;
  x ^= x >> 15u;
  x *= 0x846ca68bu;
  x ^= x >> 16u;
  return x;
}

fn value(j: u32, key: u32) -> f32 {
  return (f32(lowbias32(j ^ key) >> 21u) - 1024.0) / 1024.0 * params.scale;
}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let key = lowbias32(params.seed);
  let stride = groups.x * {{WORKGROUP_SIZE_X}}u;
  for (var i = gid.x; i < params.words; i = i + stride) {
    if (params.halves != 0u) {
      y[params.first_word + i] = pack2x16float(vec2<f32>(value(2u * i, key), value(2u * i + 1u, key)));
    } else {
      y[params.first_word + i] = bitcast<u32>(value(i, key));
    }
  }
}
