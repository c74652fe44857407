// y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]): x @ W^T + b. 16x16 output tiles, K staged through
// workgroup memory; weights of type {{W_T}} (f32 or f16), accumulation and output in f32.
{{ENABLE}}
struct LinearParams {
  m: u32,
  n: u32,
  k: u32,
  has_bias: u32,
}

@group(0) @binding(0) var<uniform> params: LinearParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<{{W_T}}>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const TILE: u32 = {{WORKGROUP_SIZE_X}}u;
var<workgroup> xs: array<f32, 256>;
var<workgroup> ws: array<f32, 256>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let col = wid.x * TILE + lid.x;   // output feature n
  let row = wid.y * TILE + lid.y;   // input row m
  let wrow = wid.x * TILE + lid.y;  // the weight row this thread stages
  var acc = 0.0;
  let tiles = (params.k + TILE - 1u) / TILE;
  for (var t = 0u; t < tiles; t = t + 1u) {
    let kk = t * TILE + lid.x;
    var xv = 0.0;
    if (row < params.m && kk < params.k) {
      xv = x[row * params.k + kk];
    }
    var wv = 0.0;
    if (wrow < params.n && kk < params.k) {
      wv = f32(w[wrow * params.k + kk]);
    }
    xs[lid.y * TILE + lid.x] = xv;
    ws[lid.y * TILE + lid.x] = wv;
    workgroupBarrier();
    for (var i = 0u; i < TILE; i = i + 1u) {
      acc = acc + xs[lid.y * TILE + i] * ws[lid.x * TILE + i];
    }
    workgroupBarrier();
  }
  if (row < params.m && col < params.n) {
    if (params.has_bias != 0u) {
      acc = acc + bias[col];
    }
    y[row * params.n + col] = acc;
  }
}
