// y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]) with W held as GGML blocks (wgraph/ggml_blocks.py), dequantized
// in registers: a GEMV for a few rows of x (decode), bound by reading W's blocks once.
// A workgroup owns FEATURES output features; its THREADS threads split a weight row into slices (SLICE_WORDS
// quant words of one block with the block's scales: 8 to 32 weights), so a warp reads neighbouring bytes and
// neighbouring x. A thread loads its slice of each of the FEATURES rows first (the loads in flight together),
// then every x vector it loads feeds all FEATURES of them. Quants become exact f32 values (quant_common.wgsl),
// summed against x per half-slice; the block's scale (and min, times the sum of x) multiply the sums, not each
// weight. Then a two-pass workgroup-memory sum per (row, feature). Rows of x past MAX_ROWS are chunks on grid z.
struct QuantLinearParams {
  m: u32,
  n: u32,
  k: u32,
  has_bias: u32,
  row_blocks: u32,  // blocks per weight row: k / BLOCK_WEIGHTS
}

@group(0) @binding(0) var<uniform> params: QuantLinearParams;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> blocks: array<{{W_WORD}}>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const THREADS: u32 = {{WORKGROUP_SIZE_X}}u;
const FEATURES: u32 = {{FEATURES_PER_WORKGROUP}}u;
const MAX_ROWS: u32 = {{MAX_ROWS}}u;
const SLICE_WORDS: u32 = {{SLICE_WORDS}}u;
const BLOCK_BYTES: u32 = {{BLOCK_BYTES}}u;  // the matrix row's layout (wgraph/ggml_blocks.py FORMATS)
const OUTPUTS: u32 = MAX_ROWS * FEATURES;
const GROUP: u32 = THREADS / OUTPUTS;  // threads that add one output's partials in the reduction's first pass
const SPAN: u32 = THREADS / GROUP;
const_assert THREADS % OUTPUTS == 0u;

// One weight row's slice: its quant words, and per half-slice the scale of the quant sum and the offset that
// multiplies the sum of x (Q4_1's and Q4_K's mins; 0 for Q4_0 and Q8_0, whose quants carry their offset).
struct Slice {
  words: array<u32, SLICE_WORDS>,
  scale: vec2<f32>,
  offset: vec2<f32>,
}

//!include quant_common.wgsl
//!include {{QTYPE_SLICE}}

const X_HALF: u32 = X_VECS / 2u;

var<workgroup> partial: array<f32, OUTPUTS * THREADS>;
var<workgroup> sums: array<f32, THREADS>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let first = (wid.x + wid.y * groups.x) * FEATURES;
  let row0 = wid.z * MAX_ROWS;
  let rows = min(params.m - row0, MAX_ROWS);
  let xrow = params.k / 4u;
  let slices = params.row_blocks * SLICES_PER_BLOCK;
  var acc: array<f32, OUTPUTS>;
  for (var s = lid.x; s < slices; s = s + THREADS) {
    let blk = s / SLICES_PER_BLOCK;
    let part = s % SLICES_PER_BLOCK;
    //!repeat F FEATURES
    let sl$F = load_slice(min(first + ${F}u, params.n - 1u) * params.row_blocks + blk, part);  // past n: dropped
    //!end
    //!repeat F FEATURES
    let v$F = slice_values(sl$F);
    //!end
    //!repeat R MAX_ROWS
    if (${R}u < rows) {
      let xb = (row0 + ${R}u) * xrow;
      var xs: array<vec4<f32>, X_VECS>;
      //!repeat I X_VECS
      xs[$I] = x[xb + slice_x(blk, part, ${I}u)];
      //!end
      var xsum = vec2<f32>(0.0);
      if (HAS_MIN) {
        //!repeat I X_HALF
        xsum = xsum + vec2<f32>(dot(xs[$I], vec4<f32>(1.0)), dot(xs[X_HALF + ${I}u], vec4<f32>(1.0)));
        //!end
      }
      //!repeat F FEATURES
      {
        var sums = vec2<f32>(0.0);
        //!repeat I X_HALF
        sums = sums + vec2<f32>(dot(v$F[$I], xs[$I]), dot(v$F[X_HALF + ${I}u], xs[X_HALF + ${I}u]));
        //!end
        var t = dot(sl$F.scale, sums);
        if (HAS_MIN) {
          t = t + dot(sl$F.offset, xsum);
        }
        acc[${R}u * FEATURES + ${F}u] += t;
      }
      //!end
    }
    //!end
  }
  //!repeat O OUTPUTS
  partial[${O}u * THREADS + lid.x] = acc[$O];
  //!end
  workgroupBarrier();
  // Two passes, two barriers: GROUP threads per output each add SPAN of its partials (neighbouring threads
  // read neighbouring words; the start rotated by output, so outputs sharing a warp read distinct banks), then
  // one thread per output adds those GROUP sums.
  let o = lid.x / GROUP;
  let g = lid.x % GROUP;
  var s = 0.0;
  //!repeat J SPAN
  s = s + partial[o * THREADS + ((${J}u + o) % SPAN) * GROUP + g];
  //!end
  sums[lid.x] = s;
  workgroupBarrier();
  if (lid.x < rows * FEATURES) {
    var v = 0.0;
    //!repeat J GROUP
    v = v + sums[lid.x * GROUP + (${J}u + lid.x) % GROUP];
    //!end
    let r = lid.x / FEATURES;
    let f = first + lid.x % FEATURES;
    if (f < params.n) {
      if (params.has_bias != 0u) {
        v = v + bias[f];
      }
      y[(row0 + r) * params.n + f] = v;
    }
  }
}
