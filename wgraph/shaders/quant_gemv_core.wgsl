// The quantized GEMV core (included by quant_gemv.wgsl and quant_gemv_rope_kv.wgsl, which declare the params
// struct with quant_gemv_fields.wgsl, the bindings x, blocks, heads, norm_w, and two functions): a slot owning
// FT weight rows w_row(slot + f * slots) (w_row: the kernel's map from a slot's feature to a row of W; the
// identity for the plain GEMV) sums their blocks, dequantized in registers, against a chunk of 1..MAX_ROWS
// rows of x (rows row0 ..; with the fused RMSNorm's x^2) and hands the totals tot[at + f * MAX_ROWS + r]
// (then x^2 per row: row_scale) to the kernel's epilogue(slot, at, lane, row0, rows), called by the slot's
// LANES threads of a slot < params.slots in a chunk with rows > 0. The walk is quant_gemv.wgsl's (its header).
const THREADS: u32 = {{WORKGROUP_SIZE_X}}u;
const LANES: u32 = {{LANES}}u;
const FT: u32 = {{FEATURES_PER_LANE}}u;
const MAX_ROWS: u32 = {{MAX_ROWS}}u;
const UNROLL: u32 = {{UNROLL}}u;
const BLOCK_WEIGHTS: u32 = {{BLOCK_WEIGHTS}}u;  // the matrix row's layout (wgraph/ggml_blocks.py FORMATS)
const BLOCK_BYTES: u32 = {{BLOCK_BYTES}}u;
const LPB: u32 = {{LANES_PER_BLOCK}}u;
// 0: each lane loads its x vectors (and the norm's weight) per block; else the chunk's rows of x, times the norm's
// weight, are staged once per workgroup in workgroup memory (in_features <= STAGE_K) and the lanes read them there
const STAGE_K: u32 = {{STAGE_K}}u;
const STAGED: bool = STAGE_K > 0u;
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

var<workgroup> xstage: array<vec4<f32>, max(1u, STAGE_K / 4u * MAX_ROWS)>;  // x' = x * norm_w, row r at r * k / 4
var<workgroup> xsq_part: array<f32, max(1u, THREADS * MAX_ROWS * min(STAGE_K, 1u))>;  // x^2 per group of `width` lanes, row
var<workgroup> xsq: array<f32, MAX_ROWS>;  // x^2 summed over each row of the chunk

// STAGED: the workgroup's threads load the chunk's rows of x once (coalesced), write x * norm_w into xstage and
// sum x^2 per row into xsq (by subgroup shuffles of `width` lanes, then over the subgroups' partials). Every
// thread calls it (a barrier); xstage is ready when it returns, xsq once slot_totals' barriers have passed.
fn stage_x(t: u32, width: u32, row0: u32, rows: u32) {
  let xrow = params.k / 4u;
  let norm = params.has_norm != 0u;
  var sq: array<f32, MAX_ROWS>;
  for (var i = t; i < xrow; i = i + THREADS) {
    var g = vec4<f32>(1.0);
    if (norm) {
      g = norm_w[i];
    }
    //!repeat R MAX_ROWS
    if (${R}u < rows) {
      let v = x[(row0 + ${R}u) * xrow + i];
      sq[${R}u] += dot(v, v);
      xstage[${R}u * xrow + i] = v * g;
    }
    //!end
  }
  if (norm) {
    for (var mask = width / 2u; mask >= 1u; mask = mask / 2u) {
      //!repeat R MAX_ROWS
      sq[${R}u] += shuffle_xor(sq[${R}u], mask);
      //!end
    }
    if (t % width == 0u) {
      //!repeat R MAX_ROWS
      xsq_part[(t / width) * MAX_ROWS + ${R}u] = sq[${R}u];
      //!end
    }
  }
  workgroupBarrier();
  if (norm && t < MAX_ROWS) {
    var s = 0.0;
    for (var p = 0u; p < THREADS / width; p = p + 1u) {
      s += xsq_part[p * MAX_ROWS + t];
    }
    xsq[t] = s;
  }
}

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
  if (norm && !STAGED) {
    g$I = norm_w[xb + LPB * ${I}u];
  }
  //!end
  //!repeat R MAX_ROWS
  if (${R}u < rows) {
    var xs: array<vec4<f32>, XV>;
    //!repeat I XV
    if (STAGED) {
      xs[$I] = xstage[${R}u * xrow + xb + LPB * ${I}u];
    } else {
      xs[$I] = x[(row0 + ${R}u) * xrow + xb + LPB * ${I}u];
    }
    //!end
    if (norm && !STAGED) {
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
  // the slot's rows (through the including kernel's w_row; as their first block); a slot past the end reads a
  // real row and drops its sums
  //!repeat F FT
  let base$F = w_row(min(slot + ${F}u * params.slots, params.n - 1u)) * rb;
  //!end
  if (STAGED) {
    stage_x(t, width, row0, rows);
  }
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
  if (slot < params.slots && rows > 0u) {
    epilogue(slot, slot_local * V, lane, row0, rows);
  }
}

// 1 / rms of row r of the chunk (1 without a norm) from a slot's totals at tot[at ..]
fn row_scale(at: u32, r: u32) -> f32 {
  if (params.has_norm == 0u) {
    return 1.0;
  }
  if (STAGED) {
    return inverseSqrt(xsq[r] / f32(params.k) + params.eps);
  }
  return inverseSqrt(tot[at + FT * MAX_ROWS + r] / f32(params.k) + params.eps);
}
