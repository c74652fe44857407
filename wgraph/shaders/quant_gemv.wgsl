// y[r, o] = epilogue(sum_k W[row, k] * x'[r, k]) for 1..MAX_ROWS rows of x (a chunk of rows per group of
// `groups_per_chunk` workgroups) with W held as GGML blocks (wgraph/ggml_blocks.py), dequantized in registers:
// the decode step's GEMV, bound by reading W's blocks once. The layout of gemv.wgsl (the f16 GEMV): a workgroup
// holds SLOTS feature slots of LANES lanes; a slot owns FT weight rows (slot + f * slots), so each x load feeds
// FT rows and MAX_ROWS rows of x share each weight load; lanes of a slot sum by subgroup shuffles.
//
// How lanes walk a row (the format's reader, {{QTYPE_LANES}}, says what a lane reads): LPB lanes share a block,
// lane t of them taking quant words t, t + LPB, ... and the x vectors t + LPB * i of the block's x. So the
// lanes of a step read neighbouring words of W and neighbouring 16-byte vectors of x (a warp's x load is whole
// 128-byte lines; with a block or half a block per lane it touched 16 to 32 lines), and a lane's place in its
// block, hence every shift and scale index it uses, is fixed for the whole row. A step covers BPS = LANES / LPB
// blocks; UNROLL steps of FT rows load before any of them is used (the loads in flight together).
// Prologue (has_norm): RMSNorm of x folded in: x' = x * norm_w, and the slot's lanes, which see every x once,
// also sum x^2, so the row's 1 / rms scales the sums. Epilogue: 1 / rms, + bias[row], swiglu (W holds
// [gate; up]: FT even, slot rows f < FT / 2 are gates and f + FT / 2 their ups), + residual[r, o].
//!include elementwise_math.wgsl
struct QuantGemvParams {
  m: u32,                 // rows of x (all chunks)
  n: u32,                 // rows of W
  k: u32,                 // in_features: row_blocks whole blocks
  row_blocks: u32,        // blocks per weight row
  slots: u32,             // feature slots: ceil(n / FT), n / FT with swiglu
  out_n: u32,             // output features: n, or n / 2 with swiglu
  groups_per_chunk: u32,  // workgroups per chunk of MAX_ROWS rows of x
  has_bias: u32,
  has_residual: u32,
  has_norm: u32,
  swiglu: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> params: QuantGemvParams;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> blocks: array<u32>;
@group(0) @binding(3) var<storage, read> heads: array<vec4<u32>>;  // the same buffer in 16-byte words
@group(0) @binding(4) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(6) var<storage, read> residual: array<f32>;
@group(0) @binding(7) var<storage, read_write> y: array<f32>;

const THREADS: u32 = {{WORKGROUP_SIZE_X}}u;
const LANES: u32 = {{LANES}}u;
const FT: u32 = {{FEATURES_PER_LANE}}u;
const MAX_ROWS: u32 = {{MAX_ROWS}}u;
const UNROLL: u32 = {{UNROLL}}u;
const BLOCK_WEIGHTS: u32 = {{BLOCK_WEIGHTS}}u;  // the matrix row's layout (wgraph/ggml_blocks.py FORMATS)
const BLOCK_BYTES: u32 = {{BLOCK_BYTES}}u;
const LPB: u32 = {{LANES_PER_BLOCK}}u;
const SLOTS: u32 = THREADS / LANES;
const ROW_GROUPS: u32 = 1u;  // every thread takes every row of x (gemv_slot_totals.wgsl)
const BPS: u32 = LANES / LPB;           // blocks a slot takes per step
const XB: u32 = BLOCK_WEIGHTS / 4u;     // x vectors per block
const XV: u32 = XB / LPB;               // x vectors a lane takes per block
const_assert LANES % LPB == 0u;

//!include quant_common.wgsl
//!include {{QUANT_WORDS}}
//!include {{QTYPE_LANES}}
//!include {{GEMV_ENTRY}}

//!include gemv_slot_totals.wgsl
//!include gemv_slot_output.wgsl

// One step of a lane: block `blk` of its FT rows (loaded: u) against every row of x in the chunk; the quants
// become values once, for all rows of x.
fn accumulate(blk: u32, t: u32, u: array<Unit, FT>, row0: u32, rows: u32, vals: ptr<function, array<f32, VT>>) {
  let values = array<Values, FT>(
  //!repeat F FT
    unit_values(u[$F]),
  //!end
  );
  let xrow = params.k / 4u;
  let xb = blk * XB + t;  // the lane's first x vector in a row of x
  let norm = params.has_norm != 0u;
  //!repeat I XV
  var g$I = vec4<f32>(1.0);
  if (norm) {
    g$I = norm_w[xb + LPB * ${I}u];
  }
  //!end
  //!repeat R MAX_ROWS
  if (${R}u < rows) {
    var xs: array<vec4<f32>, XV>;
    //!repeat I XV
    xs[$I] = x[(row0 + ${R}u) * xrow + xb + LPB * ${I}u];
    //!end
    if (norm) {
      //!repeat I XV
      (*vals)[FT * MAX_ROWS + ${R}u] += dot(xs[$I], xs[$I]);
      xs[$I] = xs[$I] * g$I;
      //!end
    }
    // what the format's dot needs of the lane's x once for all FT rows (the sums of x a min multiplies)
    let xp = x_part(xs);
    //!repeat F FT
    (*vals)[${F}u * MAX_ROWS + ${R}u] += unit_dot(values[$F], xs, xp);
    //!end
  }
  //!end
}

// Thread t (numbered so a slot's lanes share a subgroup where there are subgroups) of workgroup `group`;
// `width`: lanes of an aligned group that one subgroup sums by shuffles (1: none).
fn gemv(t: u32, group: u32, width: u32) {
  let slot_local = t / LANES;
  let lane = t % LANES;
  let chunk = group / params.groups_per_chunk;
  let slot = (group % params.groups_per_chunk) * SLOTS + slot_local;
  let row0 = chunk * MAX_ROWS;
  let rows = select(0u, min(params.m - row0, MAX_ROWS), row0 < params.m);  // 0 in a grid's padding
  let tb = lane % LPB;  // the lane's place in a block
  let rb = params.row_blocks;
  // the slot's rows (as their first block); a slot past the end reads a real row and drops its sums
  //!repeat F FT
  let base$F = min(slot + ${F}u * params.slots, params.n - 1u) * rb;
  //!end
  var vals: array<f32, VT>;
  var blk = select(rb, lane / LPB, rows > 0u);
  for (; blk < rb; blk = blk + UNROLL * BPS) {
    // steps past the row's end (its last iteration) load nothing and add nothing
    //!repeat U UNROLL
    let on$U = blk + ${U}u * BPS < rb;
    var u$U: array<Unit, FT>;
    if (on$U) {
      u$U = array<Unit, FT>(
      //!repeat F FT
        load_unit(base$F + blk + ${U}u * BPS, tb),
      //!end
      );
    }
    //!end
    //!repeat U UNROLL
    if (on$U) {
      accumulate(blk + ${U}u * BPS, tb, u$U, row0, rows, &vals);
    }
    //!end
  }

  slot_totals(t, slot_local, lane, width, &vals);

  if (slot >= params.slots || rows == 0u) {
    return;
  }
  let at = slot_local * V;
  let outs = select(FT, FT / 2u, params.swiglu != 0u) * MAX_ROWS;  // (row, x row) pairs a slot writes
  for (var o = lane; o < outs; o = o + LANES) {
    let r = o % MAX_ROWS;
    let row = slot + (o / MAX_ROWS) * params.slots;
    if (r < rows && row < params.out_n) {
      var scale = 1.0;
      if (params.has_norm != 0u) {
        scale = inverseSqrt(tot[at + FT * MAX_ROWS + r] / f32(params.k) + params.eps);
      }
      var v = slot_output(at, o, row, scale);
      let at_y = (row0 + r) * params.out_n + row;
      if (params.has_residual != 0u) {
        v = v + residual[at_y];
      }
      y[at_y] = v;
    }
  }
}
