// The max of the including kernel's row x[base .. base + params.dim), with a NaN counted as +inf (WGSL's max
// may drop a NaN): softmax and sample both turn a row that holds NaN or +inf into their "no valid row" answer,
// so the max must see it. Needs row_reduce.wgsl (workgroup_max) and is_nan.wgsl; call from uniform control flow.
fn row_max_nan_as_inf(lid: u32, base: u32) -> f32 {
  // +inf from the uniform, out of constant evaluation (WGSL has no literal for it)
  let inf = bitcast<f32>(0x7f800000u | (params.dim & 0u));
  var m = -3.40282347e38;
  for (var i = lid; i < params.dim; i = i + {{WORKGROUP_SIZE_X}}u) {
    let v = f32(x[base + i]);
    m = max(m, select(v, inf, is_nan_f32(v)));
  }
  return workgroup_max(lid, m);
}
