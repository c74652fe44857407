// y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]) for at most MAX_ROWS rows of x (decode): a GEMV, bound by
// reading W once. A workgroup owns FEATURES output features; LANES threads split each weight row into 16-byte
// loads (4 f32, or 8 f16 read as u32 words and widened with unpack2x16float: no shader-f16 needed), UNROLL
// loads in flight per step, and every weight load feeds all rows of x. One workgroup-memory sum per feature.
struct LinearParams {
  m: u32,
  n: u32,
  k: u32,
  has_bias: u32,
}

@group(0) @binding(0) var<uniform> params: LinearParams;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<{{W_WORD}}>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const THREADS: u32 = {{WORKGROUP_SIZE_X}}u;
const FEATURES: u32 = {{FEATURES_PER_WORKGROUP}}u;
const LANES: u32 = THREADS / FEATURES;
const MAX_ROWS: u32 = {{MAX_ROWS}}u;
const PARTS: u32 = {{K_MULTIPLE}}u / 4u;  // vec4<f32> per 16-byte weight load (K_MULTIPLE: weights per load)
const UNROLL: u32 = 4u;

var<workgroup> partial: array<f32, MAX_ROWS * THREADS>;

fn widen_f32(v: vec4<f32>) -> array<vec4<f32>, 1> {
  return array<vec4<f32>, 1>(v);
}

fn widen_f16(v: vec4<u32>) -> array<vec4<f32>, 2> {
  return array<vec4<f32>, 2>(vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)),
                             vec4<f32>(unpack2x16float(v.z), unpack2x16float(v.w)));
}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let lane = lid.x % LANES;
  let first = (wid.x + wid.y * groups.x) * FEATURES;
  let feature = first + lid.x / LANES;
  let loads = params.k / {{K_MULTIPLE}}u;  // 16-byte loads per weight row (the planner checks k % K_MULTIPLE == 0)
  let xrow = params.k / 4u;                  // vec4s per row of x
  let wbase = min(feature, params.n - 1u) * loads;  // past the last feature: read a real row, drop the sum
  var acc: array<f32, MAX_ROWS>;
  var i = lane;
  for (; i + (UNROLL - 1u) * LANES < loads; i = i + UNROLL * LANES) {
    //!repeat U UNROLL
    let w$U = {{WIDEN}}(w[wbase + i + $U * LANES]);
    //!end
    //!repeat U UNROLL
    //!repeat R MAX_ROWS
    if ($R < params.m) {
      let xb$U$R = $R * xrow + (i + $U * LANES) * PARTS;
      //!repeat P PARTS
      acc[$R] = acc[$R] + dot(w$U[$P], x[xb$U$R + $P]);
      //!end
    }
    //!end
    //!end
  }
  for (; i < loads; i = i + LANES) {
    let wt = {{WIDEN}}(w[wbase + i]);
    //!repeat R MAX_ROWS
    if ($R < params.m) {
      //!repeat P PARTS
      acc[$R] = acc[$R] + dot(wt[$P], x[$R * xrow + i * PARTS + $P]);
      //!end
    }
    //!end
  }
  //!repeat R MAX_ROWS
  partial[$R * THREADS + lid.x] = acc[$R];
  //!end
  workgroupBarrier();
  // thread t sums the LANES partials of feature first + t % FEATURES, row t / FEATURES; the start lane is
  // rotated by t so that the threads of a subgroup read distinct banks
  let f = lid.x % FEATURES;
  let r = lid.x / FEATURES;
  if (r < min(params.m, MAX_ROWS) && first + f < params.n) {
    let base = r * THREADS + f * LANES;
    var s = 0.0;
    for (var l = 0u; l < LANES; l = l + 1u) {
      s = s + partial[base + (l + lid.x) % LANES];
    }
    if (params.has_bias != 0u) {
      s = s + bias[first + f];
    }
    y[r * params.n + first + f] = s;
  }
}
