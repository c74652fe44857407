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
// blocks; UNROLL steps of FT rows load before any of them is used (the loads in flight together). A reader with
// LPB = 1 (quant_lanes_*_whole.wgsl: a lane loads a whole block's words, fewer loads than the shared words) has
// the workgroup stage x in workgroup memory instead, STAGE_STEPS steps at a time, a lane loading its next step's
// blocks ahead with PREFETCH (quant_gemv_core.wgsl, X_STAGE).
// Prologue (HAS_NORM, an overridable constant: quant_gemv_core.wgsl): RMSNorm of x folded in: x' = x * norm_w, and the slot's lanes, which see every x once,
// also sum x^2, so the row's 1 / rms scales the sums. Epilogue: 1 / rms, + bias[row], swiglu (W holds
// [gate; up]: FT even, slot rows f < FT / 2 are gates and f + FT / 2 their ups), + residual[r, o].
//!include elementwise_math.wgsl
struct QuantGemvParams {
//!include quant_gemv_fields.wgsl
}

@group(0) @binding(0) var<uniform> params: QuantGemvParams;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> blocks: array<u32>;
@group(0) @binding(3) var<storage, read> heads: array<vec4<u32>>;  // the same buffer in 16-byte words
@group(0) @binding(4) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(6) var<storage, read> residual: array<f32>;
@group(0) @binding(7) var<storage, read_write> y: array<f32>;

//!include quant_gemv_core.wgsl
//!include gemv_slot_output.wgsl

fn w_row(p: u32) -> u32 {
  return p;
}

fn prepare_epilogue(slot: u32, lane: u32, row0: u32, rows: u32) {}  // nothing to load ahead

fn epilogue(slot: u32, at: u32, lane: u32, row0: u32, rows: u32) {
  let outs = select(FT, FT / 2u, params.swiglu != 0u) * MAX_ROWS;  // (row, x row) pairs a slot writes
  for (var o = lane; o < outs; o = o + LANES) {
    let r = o % MAX_ROWS;
    let row = slot + (o / MAX_ROWS) * params.slots;
    if (r < rows && row < params.out_n) {
      var v = slot_output(at, o, row, row_scale(at, r));
      let at_y = (row0 + r) * params.out_n + row;
      if (params.has_residual != 0u) {
        v = v + residual[at_y];
      }
      y[at_y] = v;
    }
  }
}
