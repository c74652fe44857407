// Each 4-term product summed into its total by fused multiply-adds (fma_dot): dot() and an add compile to an
// FMUL, 3 FFMA and an FADD (the H200's machine code of gemv_r8_wide_f16, h200-pipeline-sass.log), and the 8-row
// GEMVs are bound by instruction issue (gemv_ab.py's mac candidates, h100-gemv-r8-fma-1206.log: up to 12% less time).
//!include fma_dot.wgsl

// One 16-byte load's share: chunk c of the slot's FT weight rows (widened: ws) times chunk c of the RPG rows of
// x of row group rg.
fn accumulate(c: u32, rg: u32, ws: array<array<vec4<f32>, PARTS>, FT>, vals: ptr<function, array<f32, VT>>) {
  let xrow = params.k / 4u;  // vec4s per row of x
  //!repeat P PARTS
  var g$P = vec4<f32>(1.0);
  if (HAS_NORM) {
    g$P = norm_w[c * PARTS + ${P}u];
  }
  //!end
  //!repeat R RPG
  let r$R = rg * RPG + ${R}u;
  if (ALL_ROWS || r$R < params.m) {
    //!repeat P PARTS
    var x${R}_$P = x[(params.row0 + r$R) * xrow + c * PARTS + ${P}u];
    if (HAS_NORM) {
      (*vals)[FT * RPG + ${R}u] = fma_dot(x${R}_$P, x${R}_$P, (*vals)[FT * RPG + ${R}u]);
      x${R}_$P = x${R}_$P * g$P;
    }
    //!end
    //!repeat F FT
    //!repeat P PARTS
    (*vals)[${F}u * RPG + ${R}u] = fma_dot(ws[${F}u][${P}u], x${R}_$P, (*vals)[${F}u * RPG + ${R}u]);
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
  let rg = lane % ROW_GROUPS;  // row group
  let slot = group * SLOTS + slot_local;
  let loads = params.k / W_PER_LOAD;  // 16-byte loads per weight row
  // the slot's rows (through the including kernel's w_row); a slot past the end reads a real row and drops
  // its sums
  //!repeat F FT
  let wbase$F = w_row(min(slot + ${F}u * params.slots, params.n - 1u)) * loads;
  //!end
  prepare_epilogue(slot, lane, params.row0, params.m);  // the epilogue's own loads, issued before the sums
  var vals: array<f32, VT>;
  var i = lane / ROW_GROUPS;
  if (PREFETCH) {
    // the next step's words are loaded before this step's are summed, so they are in flight through its FMAs
    // (the last step's "next" re-reads a real word)
    //!repeat U UNROLL
    //!repeat F FT
    var n${U}_$F = w[wbase$F + min(i + ${U}u * KLANES, loads - 1u)];
    //!end
    //!end
    for (; i + (UNROLL - 1u) * KLANES < loads; i = i + UNROLL * KLANES) {
      //!repeat U UNROLL
      //!repeat F FT
      let w${U}_$F = n${U}_$F;
      n${U}_$F = w[wbase$F + min(i + (UNROLL + ${U}u) * KLANES, loads - 1u)];
      //!end
      //!end
      //!repeat U UNROLL
      accumulate(i + ${U}u * KLANES, rg, array<array<vec4<f32>, PARTS>, FT>(
      //!repeat F FT
        widen(w${U}_$F),
      //!end
      ), &vals);
      //!end
    }
  }
  // the steps without PREFETCH (with it, none are left: i is past them)
  for (; i + (UNROLL - 1u) * KLANES < loads; i = i + UNROLL * KLANES) {
    //!repeat U UNROLL
    //!repeat F FT
    let w${U}_$F = w[wbase$F + i + ${U}u * KLANES];
    //!end
    //!end
    //!repeat U UNROLL
    accumulate(i + ${U}u * KLANES, rg, array<array<vec4<f32>, PARTS>, FT>(
    //!repeat F FT
      widen(w${U}_$F),
    //!end
    ), &vals);
    //!end
  }
  for (; i < loads; i = i + KLANES) {
    accumulate(i, rg, array<array<vec4<f32>, PARTS>, FT>(
    //!repeat F FT
      widen(w[wbase$F + i]),
    //!end
    ), &vals);
  }

  slot_totals(t, slot_local, lane, width, &vals);
  if (slot < params.slots) {
    epilogue(slot, slot_local * V, lane);
  }
}
