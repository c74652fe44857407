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
// Every row of x the kernel serves is there (params.m == MAX_ROWS > 1): the walk's test of each row against
// params.m, a branch per row of x per step that the driver keeps inside the loop, is compiled out (ops/gemv.py's
// walk_constants: the 8-row f16 GEMVs 0.61-0.94x the time on an H100; a one-row class keeps its test).
override ALL_ROWS: bool;
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

//!include gemv_walk.wgsl
// 1 / rms of row r of x (1 without a norm) from a slot's totals at tot[at ..]
fn row_scale(at: u32, r: u32) -> f32 {
  if (!HAS_NORM) {
    return 1.0;
  }
  return inverseSqrt(tot[at + FT * MAX_ROWS + r] / f32(params.k) + params.eps);
}
