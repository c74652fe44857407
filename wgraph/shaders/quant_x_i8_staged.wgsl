// x rounded to int8 as the workgroup stages it, for the whole-block integer-dot readers
// (quant_lanes_<format>_whole_i8.wgsl; the registry fact x_int8: planned for x_int8 calls only). The integer-dot
// readers that rounded x per lane (quant_lanes_<format>_i8dot.wgsl, removed: docs/quantized.md) spent their loop on
// that rounding, redone for every block and slot (on the H200, 101 IMAD and 51 ISETP of the one-row Q4_0 loop's 437
// instructions, h200-quant-whole-sass.log); here it is done once a workgroup as x is staged, and a lane's block
// costs its loads, 8 integer dots and a few scalars.
// Staging (stage_x): one thread per block and row of x rounds it (quant_i8_round.wgsl) and stores its 8 words of
// int8 values (two vectors, at neighbouring blocks' places: a slot's lanes read neighbouring 16-byte vectors) and
// (step, sum of the values, x^2). With X_ROUNDED (the registry limit x_rounded) x comes rounded already, by the
// call's pre-pass (quant_x_round.wgsl: three vectors a block and row, in `x`), and the stage copies it.
const STAGE_X: u32 = 1u;
const X_ROUNDED: bool = {{X_ROUNDED}}u == 1u;
const_assert LPB == 1u && XB == 8u;  // a lane takes a whole 32-weight block

// Block b of the stage, row r of x: its int8 words 0-3 at xq_stage[2 r SB + b], 4-7 at [(2 r + 1) SB + b]
// (SB = STAGED_BLOCKS), then (step, sum of the values, x^2, 0) at xf_stage[r SB + b]
var<workgroup> xq_stage: array<vec4<u32>, 2u * STAGED_BLOCKS * MAX_ROWS>;
var<workgroup> xf_stage: array<vec4<f32>, STAGED_BLOCKS * MAX_ROWS>;

struct XPart {
  lo: vec4<u32>,  // x values 0-15 of the block as int8, 4 a word
  hi: vec4<u32>,  // values 16-31
  step: f32,      // x' = step * value
  sum: f32,       // the sum of the 32 values
}

//!include quant_i8_round.wgsl
//!include quant_x_i8_lane_norms.wgsl

// Stage `run`'s blocks of x (the STAGE_STEPS steps from step run * STAGE_STEPS; rows row0 .. row0 + rows of the
// chunk; zeros past the row's end)
fn stage_x(t: u32, run: u32, row0: u32, rows: u32) {
  for (var v = t; v < STAGED_BLOCKS * MAX_ROWS; v = v + THREADS) {
    let r = v / STAGED_BLOCKS;
    let b = v % STAGED_BLOCKS;
    let blk = run * STAGED_BLOCKS + b;
    var lo = vec4<u32>();  // the block's int8 words 0-3, 4-7, then (step, sum, x^2, 0): zeros past the row's end
    var hi = vec4<u32>();  // and from row `rows` on
    var f = vec4<f32>();
    if (X_ROUNDED) {
      if (r < rows && blk < params.row_blocks) {
        let at = 3u * ((row0 + r) * params.row_blocks + blk);
        lo = bitcast<vec4<u32>>(x[at]);
        hi = bitcast<vec4<u32>>(x[at + 1u]);
        f = x[at + 2u];
      }
    } else {
      let x8 = round_block(row0, r, rows, blk);
      lo = vec4<u32>(x8.q[0], x8.q[1], x8.q[2], x8.q[3]);
      hi = vec4<u32>(x8.q[4], x8.q[5], x8.q[6], x8.q[7]);
      f = vec4<f32>(x8.step, x8.sum, x8.sq, 0.0);
    }
    xq_stage[2u * r * STAGED_BLOCKS + b] = lo;
    xq_stage[(2u * r + 1u) * STAGED_BLOCKS + b] = hi;
    xf_stage[r * STAGED_BLOCKS + b] = f;
  }
}

// The lane's block blk of row r of the chunk, from the stage (its f32 vectors unused: xs stays zero)
fn row_x(row0: u32, r: u32, blk: u32, t: u32, g: array<vec4<f32>, XV>) -> RowX {
  let b = blk % STAGED_BLOCKS;
  let f = xf_stage[r * STAGED_BLOCKS + b];
  var rx: RowX;
  rx.xp = XPart(xq_stage[2u * r * STAGED_BLOCKS + b], xq_stage[(2u * r + 1u) * STAGED_BLOCKS + b], f.x, f.y);
  rx.sq = f.z;
  return rx;
}
