// GEMV for 1..MAX_ROWS rows of x (decode): y[r, o] = epilogue(sum_k W[row, k] * x'[r, k]), bound by reading
// W once. A workgroup holds SLOTS feature slots of LANES lanes; a slot owns FT weight rows (slot + f * slots),
// so each x load feeds FT rows and MAX_ROWS rows of x share each weight load. Lanes walk a row in 16-byte
// loads (the weight reader W_LOAD widens them to f32), UNROLL steps of FT loads in flight.
// Prologue (HAS_NORM, an overridable constant: gemv_core.wgsl): RMSNorm of x folded in: x' = x * norm_w, and the slot's lanes, which see every x once,
// also sum x^2, so the row's 1 / rms scales the dot products (no separate norm pass, no extra read of x).
// Epilogue: 1 / rms, + bias[row], swiglu (W holds [gate; up]: out = silu(gate) * up, FT even, slot rows
// f < FT / 2 are gates and f + FT / 2 their ups), + residual[r, o]; written to y[r, o] (out_n per row).
//!include elementwise_math.wgsl
struct GemvParams {
//!include gemv_fields.wgsl
}

@group(0) @binding(0) var<uniform> params: GemvParams;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<{{W_WORD}}>;
@group(0) @binding(3) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> residual: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

//!include gemv_core.wgsl

fn w_row(p: u32) -> u32 {
  return p;
}

//!include gemv_slot_output.wgsl

fn prepare_epilogue(slot: u32, lane: u32, row0: u32, rows: u32) {}  // nothing to load ahead

fn epilogue(slot: u32, at: u32, lane: u32) {
  let outs = select(FT, FT / 2u, params.swiglu != 0u) * MAX_ROWS;  // (row, x row) pairs a slot writes
  for (var o = lane; o < outs; o = o + LANES) {
    let r = o % MAX_ROWS;
    let row = slot + (o / MAX_ROWS) * params.slots;
    if (r < params.m && row < params.out_n) {
      let scale = row_scale(at, r);
      var v = slot_output(at, o, row, scale);
      let at_y = (params.row0 + r) * params.out_n + row;
      if (params.has_residual != 0u) {
        v = v + residual[at_y];
      }
      y[at_y] = v;
    }
  }
}
