// y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]) for many rows of x (prefill): a register-tiled GEMM. A
// workgroup owns a TILE_M x TILE_N block of y. Each step stages a TILE_K slice of x and of W in workgroup
// memory transposed (k-major: 4 rows, or 4 features, of one k are one vec4), and each thread keeps
// THREAD_M x THREAD_N sums in registers: per k it reads THREAD_M / 4 + THREAD_N / 4 vec4s and does
// THREAD_M * THREAD_N FMAs. A thread's rows (features) are groups of 4 spaced THREADS_M * 4 (THREADS_N * 4)
// apart, so neighbouring threads read neighbouring vec4s: no bank conflicts. The next slice is loaded into
// registers while this one is computed. x and W are read through load_x / load_w (16-byte loads when
// k % 4 == 0, else element by element): zeros past k_end, rows past the edge clamped (their sums are never
// written). A load's value is only touched when its slice is staged (ready_x / ready_w: the zeros past k_end,
// f16's unpack): an op on it in the prefetch would wait for the load right there, not during the FMAs (done at
// the load, 16-32 rows of f16 W ran 1.10-1.20x slower on an H100: h100-rev-candidates-1207.log). Split K:
// workgroup z sums k in [z * k_split, (z + 1) * k_split) and writes y at z * m * n, a scratch that
// linear_gemm_sum.wgsl adds up (with the bias).
struct GemmParams {
  m: u32,
  n: u32,
  k: u32,
  has_bias: u32,
  k_split: u32,
}

@group(0) @binding(0) var<uniform> params: GemmParams;
//!include linear_gemm_x_{{ALIGN}}.wgsl
//!include linear_gemm_w_{{ALIGN}}_{{W_DT}}.wgsl
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const TILE_M: u32 = {{TILE_M}}u;
const TILE_N: u32 = {{TILE_N}}u;
const TILE_K: u32 = {{TILE_K}}u;
const THREAD_M: u32 = {{THREAD_M}}u;
const THREAD_N: u32 = {{THREAD_N}}u;
const K_UNROLL: u32 = {{K_UNROLL}}u;  // k steps written out per loop iteration (TILE_K: the whole slice)
const THREADS: u32 = {{WORKGROUP_SIZE_X}}u;
const THREADS_M: u32 = TILE_M / THREAD_M;
const THREADS_N: u32 = TILE_N / THREAD_N;
const GROUPS_M: u32 = THREAD_M / 4u;
const GROUPS_N: u32 = THREAD_N / 4u;
const K4: u32 = TILE_K / 4u;                  // 4-element loads per row of a slice
const LOADS_X: u32 = TILE_M * K4 / THREADS;   // loads per thread per slice
const LOADS_W: u32 = TILE_N * K4 / THREADS;
// W's loads a group (1 or 4: see the setup in main), staged by linear_gemm_stage_w_{W_QUAD}.wgsl. 4 writes a group as
// 4 vec4 stores where 4 single loads take 16 scalar ones (2-7% faster on the 32-row tiles); tiles whose threads
// load fewer than 4 units of W a slice keep 1
const W_QUAD: u32 = {{W_QUAD}}u;
// floats per k of the staged slices: padded by 4 so that the 4 stores of one load land in different banks
const STRIDE_M: u32 = TILE_M + 4u;
const STRIDE_N: u32 = TILE_N + 4u;
const_assert THREADS_M * THREADS_N == THREADS;
const_assert GROUPS_M * 4u == THREAD_M && GROUPS_N * 4u == THREAD_N;
const_assert LOADS_X * THREADS == TILE_M * K4 && LOADS_W * THREADS == TILE_N * K4;
const_assert LOADS_W % W_QUAD == 0u;
const_assert K4 * 4u == TILE_K && TILE_K % K_UNROLL == 0u;

var<workgroup> xs: array<vec4<f32>, TILE_K * STRIDE_M / 4u>;
var<workgroup> ws: array<vec4<f32>, TILE_K * STRIDE_N / 4u>;

// the bias of features col..col+3 (zeros past n, or without a bias)
fn bias4(col: u32) -> vec4<f32> {
  var b = vec4<f32>(0.0);
  if (params.has_bias != 0u) {
    //!repeat C 4
    if (col + ${C}u < params.n) {
      b[$C] = bias[col + ${C}u];
    }
    //!end
  }
  return b;
}

// y[base + col + c] = v[c] for the features col + c that exist
fn store4(base: u32, col: u32, v: vec4<f32>) {
  //!repeat C 4
  if (col + ${C}u < params.n) {
    y[base + col + ${C}u] = v[$C];
  }
  //!end
}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  // x runs along the rows of y: the workgroups running at once share a few tiles of W (one pass over a
  // large W, from DRAM) and all of x (few rows: it stays in L2)
  let m0 = wid.x * TILE_M;
  let n0 = wid.y * TILE_N;
  let k_begin = wid.z * params.k_split;
  let k_end = min(params.k, k_begin + params.k_split);
  let tm = t / THREADS_N;
  let tn = t % THREADS_N;

  // load I of this thread is unit u = t + I * THREADS of a slice: row (feature) u / K4, k 4 * (u % K4)
  //!repeat I LOADS_X
  let x_row$I = min(m0 + (t + ${I}u * THREADS) / K4, params.m - 1u);
  let x_k$I = 4u * ((t + ${I}u * THREADS) % K4);
  let x_at$I = 4u * x_k$I * (STRIDE_M / 4u) + (t + ${I}u * THREADS) / K4;  // float index of (k, row) in xs
  var x_next$I = load_x(x_row$I, k_begin + x_k$I, k_end);
  //!end
  // W's loads come in groups of W_QUAD neighbouring features at the same 4 k: group Q of this thread is
  // q = t + Q * THREADS of a slice, features W_QUAD * (q / K4) + R, k 4 * (q % K4)
  //!repeat Q LOADS_W / W_QUAD
  let w_k$Q = 4u * ((t + ${Q}u * THREADS) % K4);
  let w_at$Q = w_k$Q * STRIDE_N + W_QUAD * ((t + ${Q}u * THREADS) / K4);  // float index of (k, first feature) in ws
  //!repeat R W_QUAD
  let w_row${Q}_${R} = min(n0 + W_QUAD * ((t + ${Q}u * THREADS) / K4) + ${R}u, params.n - 1u);
  var w_next${Q}_${R} = load_w(w_row${Q}_${R}, k_begin + w_k$Q, k_end);
  //!end
  //!end

  //!repeat G GROUPS_M
  //!repeat R 4
  //!repeat H GROUPS_N
  var acc_${G}_${R}_${H} = vec4<f32>(0.0);
  //!end
  //!end
  //!end

  for (var k0 = k_begin; k0 < k_end; k0 = k0 + TILE_K) {
    workgroupBarrier();  // every thread is done reading the previous slice
    //!repeat I LOADS_X
    {
      let xv = ready_x(x_next$I, k0 + x_k$I, k_end);
      //!repeat C 4
      xs[(x_at$I + ${C}u * STRIDE_M) / 4u][x_at$I % 4u] = xv[$C];
      //!end
    }
    //!end
    //!include linear_gemm_stage_w_{{W_QUAD}}.wgsl
    workgroupBarrier();
    let k_next = k0 + TILE_K;
    if (k_next < k_end) {  // in flight while this slice is computed
      //!repeat I LOADS_X
      x_next$I = load_x(x_row$I, k_next + x_k$I, k_end);
      //!end
      //!repeat Q LOADS_W / W_QUAD
      //!repeat R W_QUAD
      w_next${Q}_${R} = load_w(w_row${Q}_${R}, k_next + w_k$Q, k_end);
      //!end
      //!end
    }
    for (var kk = 0u; kk < TILE_K; kk = kk + K_UNROLL) {
      //!repeat U K_UNROLL
      {
        let xk = (kk + ${U}u) * (STRIDE_M / 4u) + tm;
        let wk = (kk + ${U}u) * (STRIDE_N / 4u) + tn;
        //!repeat G GROUPS_M
        let a$G = xs[xk + ${G}u * THREADS_M];
        //!end
        //!repeat H GROUPS_N
        let b$H = ws[wk + ${H}u * THREADS_N];
        //!end
        //!repeat G GROUPS_M
        //!repeat R 4
        //!repeat H GROUPS_N
        acc_${G}_${R}_${H} = fma(vec4<f32>(a$G[$R]), b$H, acc_${G}_${R}_${H});
        //!end
        //!end
        //!end
      }
      //!end
    }
  }

  let out = wid.z * params.m * params.n;
  //!repeat H GROUPS_N
  let col$H = n0 + (${H}u * THREADS_N + tn) * 4u;
  let bias$H = bias4(col$H);
  //!end
  //!repeat G GROUPS_M
  //!repeat R 4
  {
    let row = m0 + (${G}u * THREADS_M + tm) * 4u + ${R}u;
    if (row < params.m) {
      //!repeat H GROUPS_N
      store4(out + row * params.n, col$H, acc_${G}_${R}_${H} + bias$H);
      //!end
    }
  }
  //!end
  //!end
}
