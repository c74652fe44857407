// The plain GEMV epilogue's value (gemv.wgsl, quant_gemv.wgsl): output (row, x row r) of a slot from its totals
// at tot[at ..], value o = f * MAX_ROWS + r: scaled by the row's 1 / rms, + bias, then swiglu with its up at
// f + FT / 2 (W holds [gate; up]); the caller adds the residual and writes it.
fn slot_output(at: u32, o: u32, row: u32, scale: f32) -> f32 {
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
  return v;
}
