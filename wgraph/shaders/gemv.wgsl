// GEMV for 1..MAX_ROWS rows of x (decode): y[r, o] = epilogue(sum_k W[row, k] * x'[r, k]), bound by reading
// W once. A workgroup holds SLOTS feature slots of LANES lanes; a slot owns FT weight rows (slot + f * slots),
// so each x load feeds FT rows and MAX_ROWS rows of x share each weight load. Lanes walk a row in 16-byte
// loads (the weight reader W_LOAD widens them to f32), UNROLL steps of FT loads in flight.
// Prologue (has_norm): RMSNorm of x folded in: x' = x * norm_w, and the slot's lanes, which see every x once,
// also sum x^2, so the row's 1 / rms scales the dot products (no separate norm pass, no extra read of x).
// Epilogue: 1 / rms, + bias[row], swiglu (W holds [gate; up]: out = silu(gate) * up, FT even, slot rows
// f < FT / 2 are gates and f + FT / 2 their ups), + residual[r, o]; written to y[r, o] (out_n per row).
//!include elementwise_math.wgsl
struct GemvParams {
  m: u32,             // rows of x (<= MAX_ROWS)
  n: u32,             // rows of W
  k: u32,             // in_features (a multiple of W_PER_LOAD)
  slots: u32,         // feature slots: ceil(n / FT), n / FT with swiglu
  out_n: u32,         // output features: n, or n / 2 with swiglu
  has_bias: u32,
  has_residual: u32,
  has_norm: u32,
  swiglu: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> params: GemvParams;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<{{W_WORD}}>;
@group(0) @binding(3) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> residual: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

//!include {{W_LOAD}}
//!include {{GEMV_ENTRY}}

const THREADS: u32 = {{WORKGROUP_SIZE_X}}u;
const LANES: u32 = {{LANES}}u;
const FT: u32 = {{FEATURES_PER_LANE}}u;
const MAX_ROWS: u32 = {{MAX_ROWS}}u;
const UNROLL: u32 = {{UNROLL}}u;
const SLOTS: u32 = THREADS / LANES;
//!include gemv_slot_totals.wgsl

// One 16-byte load's share: chunk c of the slot's FT weight rows (widened: ws) times chunk c of every row of x.
fn accumulate(c: u32, ws: array<array<vec4<f32>, PARTS>, FT>, vals: ptr<function, array<f32, V>>) {
  let xrow = params.k / 4u;  // vec4s per row of x
  let norm = params.has_norm != 0u;
  //!repeat P PARTS
  var g$P = vec4<f32>(1.0);
  if (norm) {
    g$P = norm_w[c * PARTS + ${P}u];
  }
  //!end
  //!repeat R MAX_ROWS
  if (${R}u < params.m) {
    //!repeat P PARTS
    var x${R}_$P = x[${R}u * xrow + c * PARTS + ${P}u];
    if (norm) {
      (*vals)[FT * MAX_ROWS + ${R}u] += dot(x${R}_$P, x${R}_$P);
      x${R}_$P = x${R}_$P * g$P;
    }
    //!end
    //!repeat F FT
    //!repeat P PARTS
    (*vals)[${F}u * MAX_ROWS + ${R}u] += dot(ws[${F}u][${P}u], x${R}_$P);
    //!end
    //!end
  }
  //!end
}

// Thread t (numbered so a slot's lanes share a subgroup where there are subgroups) of workgroup `group`;
// `width`: lanes of an aligned group that one subgroup sums by shuffles (1: none).
fn gemv(t: u32, group: u32, width: u32) {
  let slot_local = t / LANES;
  let lane = t % LANES;
  let slot = group * SLOTS + slot_local;
  let loads = params.k / W_PER_LOAD;  // 16-byte loads per weight row
  // the slot's rows; a slot past the end reads a real row and drops its sums
  //!repeat F FT
  let wbase$F = min(slot + ${F}u * params.slots, params.n - 1u) * loads;
  //!end
  var vals: array<f32, V>;
  var i = lane;
  for (; i + (UNROLL - 1u) * LANES < loads; i = i + UNROLL * LANES) {
    //!repeat U UNROLL
    //!repeat F FT
    let w${U}_$F = w[wbase$F + i + ${U}u * LANES];
    //!end
    //!end
    //!repeat U UNROLL
    accumulate(i + ${U}u * LANES, array<array<vec4<f32>, PARTS>, FT>(
    //!repeat F FT
      widen(w${U}_$F),
    //!end
    ), &vals);
    //!end
  }
  for (; i < loads; i = i + LANES) {
    accumulate(i, array<array<vec4<f32>, PARTS>, FT>(
    //!repeat F FT
      widen(w[wbase$F + i]),
    //!end
    ), &vals);
  }

  slot_totals(t, slot_local, lane, width, &vals);

  if (slot >= params.slots) {
    return;
  }
  let at = slot_local * V;
  let outs = select(FT, FT / 2u, params.swiglu != 0u) * MAX_ROWS;  // (row, x row) pairs a slot writes
  for (var o = lane; o < outs; o = o + LANES) {
    let r = o % MAX_ROWS;
    let row = slot + (o / MAX_ROWS) * params.slots;
    if (r < params.m && row < params.out_n) {
      var scale = 1.0;
      if (params.has_norm != 0u) {
        scale = inverseSqrt(tot[at + FT * MAX_ROWS + r] / f32(params.k) + params.eps);
      }
      var v = tot[at + o] * scale;
      if (params.has_bias != 0u) {
        v = v + bias[row];
      }
      if (params.swiglu != 0u) {
        var up = tot[at + o + FT / 2u * MAX_ROWS] * scale;
        if (params.has_bias != 0u) {
          up = up + bias[row + params.out_n];
        }
        v = silu(v) * up;
      }
      if (params.has_residual != 0u) {
        v = v + residual[r * params.out_n + row];
      }
      y[r * params.out_n + row] = v;
    }
  }
}
