// The GEMV core's K walk with x staged in workgroup memory (a variant's limit x_stage = N >= 1, which alone picks
// this walk; x_stage 0 gemv_walk.wgsl, which reads x from the storage buffer). Why: the 8-row GEMVs are
// bound by instruction issue, and a storage load of x costs the load plus the driver's bounds check (3
// instructions; docs/benchmarks.md "The machine code") while a thread loads RPG x PARTS vec4s of x per weight
// load; a workgroup-memory read has no bounds check. Every slot's lane i reads the same x pieces at a step (x
// does not depend on the slot's weight row), so one staged copy serves every slot: the workgroup copies the next
// N steps' x (the rows < m, the loads the steps take: N x UNROLL x KLANES, with the norm weight's pieces under
// HAS_NORM), barrier, the steps read it, and a barrier before the next stage is copied over it. The sums are
// today's (x^2 of the raw x, then x * norm_w) in today's order, so the numerics are gemv_walk.wgsl's.
// The walk is a workgroup-uniform loop over steps (every thread meets the barriers); the last step, which may
// run past the row, checks each load.
const X_STAGE: u32 = {{X_STAGE}}u;    // steps a stage holds
const STEP: u32 = UNROLL * KLANES;    // 16-byte weight loads one step takes along a row (every K-lane)
const SPAN: u32 = X_STAGE * STEP;     // weight loads a stage covers
const XS_PIECES: u32 = SPAN * PARTS;  // vec4s of one row of x a stage holds
// a row's stride in xs: one past its pieces, odd, so that neighbouring threads of other row groups (rows RPG
// apart) read other banks than the K-lanes beside them; piece P of load l of the stage is at P * SPAN + l
const XS_ROW: u32 = XS_PIECES + 1u;
const_assert X_STAGE >= 1u;

var<workgroup> xs: array<vec4<f32>, MAX_ROWS * XS_ROW>;  // the stage's x, rows < m
var<workgroup> gs: array<vec4<f32>, XS_PIECES>;          // the stage's norm weight (HAS_NORM)

// The stage of loads base .. base + SPAN (those < loads) copied by every thread of the workgroup, neighbouring
// threads reading neighbouring vec4s of x.
fn stage_x(t: u32, base: u32, loads: u32) {
  let xrow = params.k / 4u;  // vec4s per row of x
  let first = base * PARTS;  // the stage's first vec4 of a row
  let have = min(XS_PIECES, (loads - base) * PARTS);  // vec4s of a row it holds (fewer in the last stage)
  for (var e = t; e < params.m * XS_PIECES; e = e + THREADS) {
    let r = e / XS_PIECES;
    let q = e % XS_PIECES;
    if (q < have) {
      xs[r * XS_ROW + (q % PARTS) * SPAN + q / PARTS] = x[r * xrow + first + q];
    }
  }
  if (HAS_NORM) {
    for (var e = t; e < have; e = e + THREADS) {
      gs[(e % PARTS) * SPAN + e / PARTS] = norm_w[first + e];
    }
  }
}

// One 16-byte load's share (gemv_walk.wgsl's, x from the stage): load l of the stage, chunk l of the slot's FT
// weight rows (widened: ws) times the stage's pieces of load l of the RPG rows of x of row group rg.
fn accumulate(l: u32, rg: u32, ws: array<array<vec4<f32>, PARTS>, FT>, vals: ptr<function, array<f32, VT>>) {
  //!repeat P PARTS
  var g$P = vec4<f32>(1.0);
  if (HAS_NORM) {
    g$P = gs[${P}u * SPAN + l];
  }
  //!end
  //!repeat R RPG
  let r$R = rg * RPG + ${R}u;
  if (r$R < params.m) {
    //!repeat P PARTS
    var x${R}_$P = xs[r$R * XS_ROW + ${P}u * SPAN + l];
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
//!include gemv_walk_slot.wgsl
  let kl = lane / ROW_GROUPS;  // the thread's K-lane: loads kl + u * KLANES of each step
  let steps = (loads + STEP - 1u) / STEP;  // uniform: every thread meets the stages' barriers
  //!repeat U UNROLL
  //!repeat F FT
  var n${U}_$F: {{W_WORD}};  // PREFETCH: the next step's words, loaded while a step is summed
  var w${U}_$F: {{W_WORD}};
  if (PREFETCH) {
    n${U}_$F = w[wbase$F + min(kl + ${U}u * KLANES, loads - 1u)];
  }
  //!end
  //!end
  for (var s0 = 0u; s0 < steps; s0 = s0 + X_STAGE) {
    let base = s0 * STEP;  // the stage's first load
    workgroupBarrier();    // every thread has read the stage before
    stage_x(t, base, loads);
    workgroupBarrier();
    for (var s = s0; s < min(s0 + X_STAGE, steps); s = s + 1u) {
      let i = s * STEP + kl;  // the thread's first load of the step
      if (PREFETCH) {
        // (the last step's "next" re-reads a real word)
        //!repeat U UNROLL
        //!repeat F FT
        w${U}_$F = n${U}_$F;
        n${U}_$F = w[wbase$F + min(i + STEP + ${U}u * KLANES, loads - 1u)];
        //!end
        //!end
      }
      if ((s + 1u) * STEP <= loads) {  // a whole step (uniform)
        if (!PREFETCH) {
          //!repeat U UNROLL
          //!repeat F FT
          w${U}_$F = w[wbase$F + i + ${U}u * KLANES];
          //!end
          //!end
        }
        //!repeat U UNROLL
        accumulate(i - base + ${U}u * KLANES, rg, array<array<vec4<f32>, PARTS>, FT>(
        //!repeat F FT
          widen(w${U}_$F),
        //!end
        ), &vals);
        //!end
      } else {  // the row's last step, past its end
        //!repeat U UNROLL
        if (i + ${U}u * KLANES < loads) {
          if (!PREFETCH) {
            //!repeat F FT
            w${U}_$F = w[wbase$F + i + ${U}u * KLANES];
            //!end
          }
          accumulate(i - base + ${U}u * KLANES, rg, array<array<vec4<f32>, PARTS>, FT>(
          //!repeat F FT
            widen(w${U}_$F),
          //!end
          ), &vals);
        }
        //!end
      }
    }
  }

  slot_totals(t, slot_local, lane, width, &vals);
  if (slot < params.slots) {
    epilogue(slot, slot_local * V, lane);
  }
}
