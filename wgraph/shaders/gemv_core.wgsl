// The GEMV core (included by gemv.wgsl and gemv_rope_kv.wgsl, which declare the params struct with
// gemv_fields.wgsl, the bindings x, w, norm_w, and three functions): a workgroup of SLOTS slots of LANES threads, a
// slot owning FT weight rows w_row(slot + f * slots) (w_row: the kernel's map from a slot's feature to a row of
// W; the identity for the plain GEMV), sums them against 1..MAX_ROWS rows of x (with the fused RMSNorm's
// x^2), and hands the totals tot[at + f * MAX_ROWS + r] (then x^2 per row: row_scale) to the kernel's
// epilogue(slot, at, lane), called by the slot's LANES threads of a slot < params.slots; every thread first calls
// prepare_epilogue(slot, lane, 0, m), where an epilogue that loads (RoPE's position, cos / sin, cache row) issues
// those loads before the sums instead of as a dependent chain after them.
// A slot's threads are LANES / ROW_GROUPS K-lanes (they split a weight row) times ROW_GROUPS row groups
// (neighbouring threads, so one load instruction serves them all: they read the same 16 bytes of W), group g
// taking rows g * RPG .. of x: more rows of x cost more threads instead of a longer chain per thread.
// Lanes walk a row in steps of UNROLL x FT 16-byte loads; with PREFETCH, a step's loads are issued while the
// step before is summed.
//!include {{W_LOAD}}
//!include {{GEMV_ENTRY}}

// RMSNorm folded in (the prologue: x' = x * norm_w, x^2 summed): set when the pipeline is made
// (Kernel.specialized), so a GEMV without a norm carries none of the prologue's instructions in its loop
// (as a uniform flag, the driver predicated both paths of every step: issue slots in both).
override HAS_NORM: bool;
const THREADS: u32 = {{WORKGROUP_SIZE_X}}u;
const LANES: u32 = {{LANES}}u;
const FT: u32 = {{FEATURES_PER_LANE}}u;
const MAX_ROWS: u32 = {{MAX_ROWS}}u;
const UNROLL: u32 = {{UNROLL}}u;
const ROW_GROUPS: u32 = {{ROW_GROUPS}}u;
const PREFETCH: bool = {{PREFETCH}}u != 0u;  // software-pipelined weight loads (gemv())
const SLOTS: u32 = THREADS / LANES;
const KLANES: u32 = LANES / ROW_GROUPS;  // threads that split one weight row
//!include gemv_slot_totals.wgsl

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
  if (r$R < params.m) {
    //!repeat P PARTS
    var x${R}_$P = x[r$R * xrow + c * PARTS + ${P}u];
    if (HAS_NORM) {
      (*vals)[FT * RPG + ${R}u] += dot(x${R}_$P, x${R}_$P);
      x${R}_$P = x${R}_$P * g$P;
    }
    //!end
    //!repeat F FT
    //!repeat P PARTS
    (*vals)[${F}u * RPG + ${R}u] += dot(ws[${F}u][${P}u], x${R}_$P);
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
  prepare_epilogue(slot, lane, 0u, params.m);  // the epilogue's own loads, issued before the sums
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

// 1 / rms of row r of x (1 without a norm) from a slot's totals at tot[at ..]
fn row_scale(at: u32, r: u32) -> f32 {
  if (!HAS_NORM) {
    return 1.0;
  }
  return inverseSqrt(tot[at + FT * MAX_ROWS + r] / f32(params.k) + params.eps);
}
