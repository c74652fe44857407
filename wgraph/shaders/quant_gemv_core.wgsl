// The quantized GEMV core (included by quant_gemv.wgsl and quant_gemv_rope_kv.wgsl, which declare the params
// struct with quant_gemv_fields.wgsl, the bindings x, blocks, heads, norm_w, and three functions): a slot owning
// FT weight rows w_row(slot + f * slots) (w_row: the kernel's map from a slot's feature to a row of W; the
// identity for the plain GEMV) sums their blocks, dequantized in registers, against a chunk of 1..MAX_ROWS
// rows of x (rows row0 ..; with the fused RMSNorm's x^2) and hands the totals tot[at + f * MAX_ROWS + r]
// (then x^2 per row: row_scale) to the kernel's epilogue(slot, at, lane, row0, rows), called by the slot's
// LANES threads of a slot < params.slots in a chunk with rows > 0, after every thread's prepare_epilogue(slot,
// lane, row0, rows) before the sums (gemv_core.wgsl's). The walk is quant_gemv.wgsl's (its header).
// RMSNorm folded in (the prologue: x' = x * norm_w, x^2 summed): set when the pipeline is made
// (Kernel.specialized), so a GEMV without a norm carries none of the prologue's instructions in its loop
// (as a uniform flag, the driver predicated both paths of every step: issue slots in both).
override HAS_NORM: bool;
// Every chunk of MAX_ROWS > 1 rows of x is full (params.m a multiple of MAX_ROWS): accumulate's test of each row
// against the chunk's rows, a branch per row of x per step inside the loop, is compiled out (ops/gemv.py's
// walk_constants: the 8-row GEMVs 0.79-0.95x the time on an H100; the f16 GEMV's ALL_ROWS, gemv_core.wgsl). A
// grid's padding chunks (rows 0) walk no blocks.
override ALL_ROWS: bool;
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

// A lane's x comes from the x source its reader includes (which says whether x is staged in workgroup memory: its
// STAGE_X): quant_x_f32.wgsl (f32 vectors, from memory or staged; through quant_x_interleaved.wgsl and
// quant_x_contiguous.wgsl), or x rounded to int8 as it is staged for the integer-dot readers: quant_x_i8_staged.wgsl
// (a lane a 32-weight block) and quant_x_i8_staged_k.wgsl (8 lanes a K-quant super-block). Each defines
// stage_x(t, run, row0, rows), lane_norms(blk, t) (the fused norm's weights for the lane's x, once for every row
// of x) and row_x(row0, r, blk, t, norms) -> RowX.
// STAGE_STEPS steps of x are staged at once (one pair of barriers for them, the steps between run without any),
// and with PREFETCH a lane loads the blocks of its next step before it sums the step's own (both: registry limits
// stage_steps and prefetch, 1 and 0 in the ggml rows).
const X_STAGE: bool = STAGE_X == 1u;
const STAGE_STEPS: u32 = {{STAGE_STEPS}}u;
const PREFETCH: bool = {{PREFETCH}}u == 1u;
const STAGED_BLOCKS: u32 = BPS * STAGE_STEPS;  // blocks of x a stage holds
const XS: u32 = max(1u, STAGED_BLOCKS * XB * STAGE_X);  // vectors of x a stage holds per row
const_assert STAGE_X <= 1u;
const_assert !X_STAGE || UNROLL == 1u;
const_assert STAGE_STEPS >= 1u && (X_STAGE || STAGE_STEPS == 1u);
const_assert {{PREFETCH}}u <= 1u && (X_STAGE || !PREFETCH);

// A lane's x for one block and row of x: the XV vectors its reader's dot takes (x' = x * norm_w with the norm; none
// for the x_int8 readers, whose x is in xp), what the dot needs of them once for all FT rows (the reader's XPart:
// the sums of x a min multiplies, x as int8), and the sum of the row's x^2 over them (the norm's).
struct RowX {
  xs: array<vec4<f32>, XV>,
  xp: XPart,
  sq: f32,
}

// Word i of the format's table (IQ2_XXS's, IQ3_XXS's grid), which follows the matrix's blocks in the buffer:
// from the word ggml_blocks.BlockFormat.table_at gives (params.n rows of W, padded to 16 bytes, 4 more)
fn table_word(i: u32) -> u32 {
  return word((params.n * params.row_blocks * BLOCK_BYTES + 19u) / 16u * 4u + i);
}

// Block b of each of the slot's FT rows (their first blocks: bases), lane tb's part of them
fn load_units(bases: array<u32, FT>, b: u32, tb: u32) -> array<Unit, FT> {
  return array<Unit, FT>(
  //!repeat F FT
    load_unit(bases[$F] + b, tb),
  //!end
  );
}

// One step of a lane: block `blk` of its FT rows (loaded: u) against every row of x in the chunk; the quants
// become values once, for all rows of x.
fn accumulate(blk: u32, t: u32, u: array<Unit, FT>, row0: u32, rows: u32, vals: ptr<function, array<f32, VT>>) {
  let values = array<Values, FT>(
  //!repeat F FT
    unit_values(u[$F]),
  //!end
  );
  let g = lane_norms(blk, t);
  //!repeat R MAX_ROWS
  if (ALL_ROWS || ${R}u < rows) {
    let rx = row_x(row0, ${R}u, blk, t, g);
    if (HAS_NORM) {
      (*vals)[FT * MAX_ROWS + ${R}u] += rx.sq;
    }
    //!repeat F FT
    (*vals)[${F}u * MAX_ROWS + ${R}u] += unit_dot(values[$F], rx.xs, rx.xp);
    //!end
  }
  //!end
}

// Thread t (numbered so a slot's lanes share a subgroup where there are subgroups) of workgroup `group`;
// `width`: lanes of an aligned group that one subgroup sums by shuffles (1: none).
fn gemv(t: u32, group: u32, width: u32) {
  one_bits = select(0u, MANTISSA_ONE, params.k != 0u);  // quant_common.wgsl: opaque to the compiler
  let slot_local = t / LANES;
  let lane = t % LANES;
  let chunk = group / params.groups_per_chunk;
  let slot = (group % params.groups_per_chunk) * SLOTS + slot_local;
  let row0 = chunk * MAX_ROWS;
  let rows = select(0u, min(params.m - row0, MAX_ROWS), row0 < params.m);  // 0 in a grid's padding
  let tb = lane % LPB;  // the lane's place in a block
  let rb = params.row_blocks;
  // the slot's rows (through the including kernel's w_row; as their first block); a slot past the end reads a
  // real row and drops its sums
  let bases = array<u32, FT>(
  //!repeat F FT
    w_row(min(slot + ${F}u * params.slots, params.n - 1u)) * rb,
  //!end
  );
  prepare_epilogue(slot, lane, row0, rows);  // the epilogue's own loads, issued before the sums
  var vals: array<f32, VT>;
  if (X_STAGE) {
    // every thread of the workgroup runs every step (the barriers): a step's blocks are the same for all slots
    let steps = (rb + BPS - 1u) / BPS;
    let live = rows > 0u;
    var ahead: array<Unit, FT>;  // PREFETCH: the blocks of the lane's next step
    if (PREFETCH && lane / LPB < rb && live) {
      ahead = load_units(bases, lane / LPB, tb);
    }
    for (var s = 0u; s < steps; s++) {
      let b = s * BPS + lane / LPB;
      let on = b < rb && live;
      var u: array<Unit, FT>;
      if (PREFETCH) {
        u = ahead;
        if (b + BPS < rb && live) {  // in flight while this step is staged and summed
          ahead = load_units(bases, b + BPS, tb);
        }
      } else if (on) {  // W's loads in flight while x is staged
        u = load_units(bases, b, tb);
      }
      if (s % STAGE_STEPS == 0u) {
        workgroupBarrier();  // the steps before have read the stage
        stage_x(t, s / STAGE_STEPS, row0, rows);
        workgroupBarrier();
      }
      if (on) {
        accumulate(b, tb, u, row0, rows, &vals);
      }
    }
  } else {
    var blk = select(rb, lane / LPB, rows > 0u);
    for (; blk < rb; blk = blk + UNROLL * BPS) {
      // steps past the row's end (its last iteration) load nothing and add nothing
      //!repeat U UNROLL
      let on$U = blk + ${U}u * BPS < rb;
      var u$U: array<Unit, FT>;
      if (on$U) {
        u$U = load_units(bases, blk + ${U}u * BPS, tb);
      }
      //!end
      //!repeat U UNROLL
      if (on$U) {
        accumulate(blk + ${U}u * BPS, tb, u$U, row0, rows, &vals);
      }
      //!end
    }
  }

  slot_totals(t, slot_local, lane, width, &vals);
  if (slot < params.slots && rows > 0u) {
    epilogue(slot, slot_local * V, lane, row0, rows);
  }
}

// 1 / rms of row r of the chunk (1 without a norm) from a slot's totals at tot[at ..]
fn row_scale(at: u32, r: u32) -> f32 {
  if (!HAS_NORM) {
    return 1.0;
  }
  return inverseSqrt(tot[at + FT * MAX_ROWS + r] / f32(params.k) + params.eps);
}
