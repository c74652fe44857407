// out[row] = a token drawn from softmax(x[row] / temperature), restricted first to the top_k largest logits
// (ties at the k-th value kept) and then to the fewest largest whose mass reaches top_p of what is left (the
// token that crosses it included, ties kept): Hugging Face's TopK then TopP warpers. One workgroup per row:
// each threshold is found by an 8-ary search over the ordered u32 keys of the values (11 passes, counts and
// masses reduced in f32), then an ordered prefix scan over contiguous chunks picks the token at which the cumulative
// mass passes u * total. u comes from a counter-based hash of (seed, step, row): equal inputs, equal draws.
{{ENABLE}}
//!include elementwise_math.wgsl
//!include row_reduce.wgsl
//!include sampling_common.wgsl

struct SampleParams {
  rows: u32,
  dim: u32,
  top_k: u32,  // 0 or >= dim: off
  top_p: f32,  // >= 1: off
  inv_temperature_pow2: f32,  // 1 / temperature = pow2 * rest, two normal f32 (ops/sampling.py)
  inv_temperature_rest: f32,
  seed_lo: u32,
  seed_hi: u32,
  step: u32,
  use_step_buf: u32,  // step + step_buf[0] when set: a replayed graph draws anew as step_buf advances
}

@group(0) @binding(0) var<uniform> params: SampleParams;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> step_buf: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;
//!include device_errors.wgsl
//!include row_max.wgsl

const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const SEARCH_PASSES: u32 = 11u;  // 8^11 > 2^32
var<workgroup> scan: array<f32, {{WORKGROUP_SIZE_X}}>;
var<workgroup> pick: array<u32, {{WORKGROUP_SIZE_X}}>;

// PCG's output permutation as a hash (Jarzynski and Olano, "Hash Functions for GPU Rendering", 2020)
fn pcg(v: u32) -> u32 {
  let state = v * 747796405u + 2891336453u;
  let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
  return (word >> 22u) ^ word;
}

// uniform on [0, 1) in steps of 2^-24, from (seed, step, row) alone
fn uniform01(row: u32, step: u32) -> f32 {
  let h = pcg(row ^ pcg(step ^ pcg(params.seed_hi ^ pcg(params.seed_lo))));
  return f32(h >> 8u) * 5.9604644775390625e-8;
}

// exp((v - m) / temperature): 1 at the row's max, exactly 0 below exp's f32 range and for v = -inf; 0 for a
// NaN d (`d < -104` is false for NaN): every weight of a row whose max is +inf (it holds a NaN or +inf).
// d is (v - m) * pow2 * rest, the first product exact: 1 / temperature may be past f32's max (temperature 1e-35)
// or a subnormal (3e38). In a row spanning more than f32's max (m >= 2^127 or v <= -2^127, of opposite signs) the
// gap is v / 2 - m / 2, times 2 pow2, chosen from v and m alone: v - m is -inf there, and choosing by a test of
// that -inf (or v / 2 - m / 2 folded to (v - m) / 2) failed on the H100 (Vulkan lets a compiler assume no
// infinities: [3e38, -3e38, 0, 1e38] at temperature 3e38 never drew -3e38, whose float64 weight is e^-2).
// Elsewhere the gap is v - m as before (halves of tiny logits would be subnormals, which a device may flush).
fn weight(v: f32, m: f32) -> f32 {
  let far = v < 0.0 && 0.0 < m && (m >= 1.7014118e38 || v <= -1.7014118e38);
  // the halves as two selects, no common factor a compiler could take out of the difference: (v - m) / 2 is -inf
  let gap = select(v, 0.5 * v, far) - select(m, 0.5 * m, far);
  let scaled = gap * select(params.inv_temperature_pow2, 2.0 * params.inv_temperature_pow2, far);
  let d = scaled * params.inv_temperature_rest;
  return select(exp_reduced(d), 0.0, d < -104.0 || is_nan_f32(d));
}

fn workgroup_min_u32(lid: u32, v: u32) -> u32 {
  pick[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s / 2u) {
    if (lid < s) {
      pick[lid] = min(pick[lid], pick[lid + s]);
    }
    workgroupBarrier();
  }
  let r = pick[0];
  workgroupBarrier();
  return r;
}

fn workgroup_max_u32(lid: u32, v: u32) -> u32 {
  pick[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s / 2u) {
    if (lid < s) {
      pick[lid] = max(pick[lid], pick[lid + s]);
    }
    workgroupBarrier();
  }
  let r = pick[0];
  workgroupBarrier();
  return r;
}

var<workgroup> bins_lo: array<vec4<f32>, {{WORKGROUP_SIZE_X}}>;
var<workgroup> bins_hi: array<vec4<f32>, {{WORKGROUP_SIZE_X}}>;

// The largest key K >= lo with f(K) >= need, where f(K) sums 1 (count) or weight(v) (mass) over the row's
// values whose key >= K: monotone in K (a sum of fewer non-negative terms, in the same order), and
// f(lo) >= need is given. An 8-ary search: each pass tests 7 pivots at once (each value adds its term to the
// bin of the highest pivot it reaches; suffix sums of the 8 bins, reduced over the workgroup, give f at
// every pivot) and keeps an eighth of the range, so 11 passes settle 32 bits.
fn search(lid: u32, base: u32, m: f32, lo_in: u32, by_mass: bool, need: f32) -> u32 {
  var lo = lo_in;
  var hi = 0xffffffffu;
  let lanes_lo = vec4<u32>(0u, 1u, 2u, 3u);
  let lanes_hi = vec4<u32>(4u, 5u, 6u, 7u);
  for (var pass_ = 0u; pass_ < SEARCH_PASSES; pass_ = pass_ + 1u) {
    let d = (hi - lo) / 8u + 1u;  // pivots lo + j d, j = 1..7; those above hi are never kept
    var h0 = vec4<f32>(0.0);
    var h1 = vec4<f32>(0.0);
    for (var i = lid; i < params.dim; i = i + WG) {
      let v = f32(x[base + i]);
      let key = order_key(v);
      if (key >= lo) {
        let b = min((key - lo) / d, 7u);
        let term = select(1.0, weight(v, m), by_mass);
        h0 = h0 + select(vec4<f32>(0.0), vec4<f32>(term), lanes_lo == vec4<u32>(b));
        h1 = h1 + select(vec4<f32>(0.0), vec4<f32>(term), lanes_hi == vec4<u32>(b));
      }
    }
    bins_lo[lid] = h0;
    bins_hi[lid] = h1;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
      if (lid < s) {
        bins_lo[lid] = bins_lo[lid] + bins_lo[lid + s];
        bins_hi[lid] = bins_hi[lid] + bins_hi[lid + s];
      }
      workgroupBarrier();
    }
    let b0 = bins_lo[0];
    let b1 = bins_hi[0];
    workgroupBarrier();
    // f(lo + j d) = bins j..7; walk j down from 7 to the first pivot in range that reaches need
    var above = 0.0;
    var keep = 0u;
    for (var j = 7u; j > 0u; j = j - 1u) {
      above = above + select(b1[j & 3u], b0[j & 3u], j < 4u);
      if (keep == 0u && j * d <= hi - lo && above >= need) {
        keep = j;
      }
    }
    if (keep < 7u && (keep + 1u) * d <= hi - lo) {
      hi = lo + (keep + 1u) * d - 1u;  // the last key below pivot keep + 1, which fell short
    }
    lo = lo + keep * d;
  }
  return lo;
}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let row = wid.x + wid.y * groups.x;
  if (row >= params.rows) {
    return;
  }
  let base = row * params.dim;
  // the row's max, +inf when it holds a NaN or +inf: torch's softmax is NaN there (exp(inf - inf)) and its
  // multinomial raises, so nothing is drawn (every weight is 0: the id 0xffffffff and the device error flag)
  let m = row_max_nan_as_inf(lid.x, base);

  // top-k: the largest key K with count(key >= K) >= top_k, which is the key of the k-th largest value
  var lo = 0u;
  if (params.top_k > 0u && params.top_k < params.dim) {
    lo = search(lid.x, base, m, 0u, false, f32(params.top_k));
  }
  // top-p: the largest key K >= lo with mass(key >= K) >= top_p * mass(key >= lo)
  if (params.top_p < 1.0) {
    var t = 0.0;
    for (var i = lid.x; i < params.dim; i = i + WG) {
      let v = f32(x[base + i]);
      t = t + select(0.0, weight(v, m), order_key(v) >= lo);
    }
    lo = search(lid.x, base, m, lo, true, params.top_p * workgroup_sum(lid.x, t));
  }

  // the draw: thread t holds the contiguous chunk t; an inclusive scan of the chunks' masses orders them
  let chunk = (params.dim + WG - 1u) / WG;
  let start = min(lid.x * chunk, params.dim);
  let end = min(start + chunk, params.dim);
  var local = 0.0;
  var last = 0u;  // 1 + the chunk's last candidate, 0 if none
  for (var i = start; i < end; i = i + 1u) {
    let v = f32(x[base + i]);
    let w = weight(v, m);
    if (order_key(v) >= lo && w > 0.0) {
      local = local + w;
      last = i + 1u;
    }
  }
  scan[lid.x] = local;
  workgroupBarrier();
  for (var off = 1u; off < WG; off = off * 2u) {
    var v = scan[lid.x];
    if (lid.x >= off) {
      v = v + scan[lid.x - off];
    }
    workgroupBarrier();
    scan[lid.x] = v;
    workgroupBarrier();
  }
  let inclusive = scan[lid.x];
  let exclusive = select(0.0, scan[max(lid.x, 1u) - 1u], lid.x > 0u);
  let step = select(params.step, params.step + step_buf[0], params.use_step_buf != 0u);
  let goal = uniform01(row, step) * scan[WG - 1u];
  var chosen = NO_INDEX;
  if (local > 0.0 && goal >= exclusive && goal < inclusive) {
    chosen = last - 1u;  // if rounding in the walk below never passes goal
    var acc = exclusive;
    for (var i = start; i < end; i = i + 1u) {
      let v = f32(x[base + i]);
      let w = weight(v, m);
      if (order_key(v) >= lo && w > 0.0) {
        acc = acc + w;
        if (goal < acc) {
          chosen = i;
          break;
        }
      }
    }
  }
  let first = workgroup_min_u32(lid.x, chosen);
  let fallback = workgroup_max_u32(lid.x, last);  // goal rounded up to the total: the last candidate
  if (lid.x == 0u) {
    // no candidate at all (every logit -inf, or a NaN or +inf in the row): write NO_INDEX, which the next
    // embedding also reports
    out[row] = select(first, fallback - 1u, first == NO_INDEX);
    if (first == NO_INDEX && fallback == 0u) {
      report_error(ERR_SAMPLE_EMPTY, 0u, 1u);
    }
  }
}
