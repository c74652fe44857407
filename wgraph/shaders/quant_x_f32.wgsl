// x as f32 vectors for quant_gemv_core.wgsl (the readers that sum f32 x: all but quant_x_i8_staged.wgsl's),
// included by the x layouts quant_x_interleaved.wgsl and quant_x_contiguous.wgsl, which say which vectors of a
// block lane t takes (lane_vector(t, i)) and whether x is staged in workgroup memory (STAGE_X). Where a block's
// lanes take neighbouring vectors (t, t + LPB, ..) a warp's loads of x are lines shared by 4-8 lanes and x is
// read from memory. Where a lane takes its own run of vectors (whole blocks), each load of a warp would touch a
// line per lane: on the H200, Q4_0's lm_head read by block pairs took 180 us with x read so and 111 us staged
// (benchmarks/results/h200-quant-whole-unstaged.log, both runs). Staged, each step the workgroup copies the
// step's BPS blocks of x (and of norm_w) with neighbouring threads on neighbouring vectors, each to the layout's
// stage_at(v), a permutation that puts the vectors the 8 lanes of a 16-byte read's quarter warp take at once in
// the 8 bank groups.
var<workgroup> x_stage: array<vec4<f32>, XS * MAX_ROWS>;
var<workgroup> norm_stage: array<vec4<f32>, XS>;

// Stage `run`'s x (the STAGE_STEPS steps from step run * STAGE_STEPS; rows row0 .. row0 + rows of the chunk;
// zeros past the row's end) and norm_w (HAS_NORM)
fn stage_x(t: u32, run: u32, row0: u32, rows: u32) {
  let xrow = params.k / 4u;
  let first = run * XS;
  for (var v = t; v < XS * MAX_ROWS; v = v + THREADS) {
    let r = v / XS;
    let i = v % XS;
    let inside = first + i < xrow;
    var val = vec4<f32>(0.0);
    if (r < rows && inside) {
      val = x[(row0 + r) * xrow + first + i];
    }
    x_stage[r * XS + stage_at(i)] = val;
    if (HAS_NORM && r == 0u) {
      norm_stage[stage_at(i)] = select(vec4<f32>(0.0), norm_w[min(first + i, xrow - 1u)], inside);
    }
  }
}

// Vector i of the lane's x for block blk (lane t of its LPB), row r of the chunk
fn lane_x(row0: u32, r: u32, blk: u32, t: u32, i: u32) -> vec4<f32> {
  if (X_STAGE) {
    return x_stage[r * XS + stage_at((blk % STAGED_BLOCKS) * XB + lane_vector(t, i))];
  }
  return x[(row0 + r) * (params.k / 4u) + blk * XB + lane_vector(t, i)];
}

fn lane_norm(blk: u32, t: u32, i: u32) -> vec4<f32> {
  if (X_STAGE) {
    return norm_stage[stage_at((blk % STAGED_BLOCKS) * XB + lane_vector(t, i))];
  }
  return norm_w[blk * XB + lane_vector(t, i)];
}

// The norm's weights for the lane's vectors of block blk (ones without the norm), for every row of x
fn lane_norms(blk: u32, t: u32) -> array<vec4<f32>, XV> {
  var g: array<vec4<f32>, XV>;
  //!repeat I XV
  g[$I] = vec4<f32>(1.0);
  if (HAS_NORM) {
    g[$I] = lane_norm(blk, t, ${I}u);
  }
  //!end
  return g;
}

// The lane's x vectors of block blk in row r of the chunk, times the norm's weights g (x^2 summed before)
fn row_x(row0: u32, r: u32, blk: u32, t: u32, g: array<vec4<f32>, XV>) -> RowX {
  var rx: RowX;
  //!repeat I XV
  rx.xs[$I] = lane_x(row0, r, blk, t, ${I}u);
  //!end
  if (HAS_NORM) {
    //!repeat I XV
    rx.sq += dot(rx.xs[$I], rx.xs[$I]);
    rx.xs[$I] = rx.xs[$I] * g[$I];
    //!end
  }
  rx.xp = x_part(rx.xs);
  return rx;
}
