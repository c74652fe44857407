// x rounded to int8 as the workgroup stages it, for the K-quant integer-dot readers whose 8 lanes share a
// 256-weight super-block (quant_lanes_q4_k_i8.wgsl, a tuning candidate; the registry fact x_int8): lane t takes
// quant word t of each 32-byte run, so weights 4t .. 4t + 3 of each of the 8 sub-blocks of 32, and meets x word t
// of each sub-block (quant_x_i8_staged.wgsl is the same for a lane a 32-weight block; why: its header).
// Staging (stage_x): one thread per sub-block and row of x rounds it (quant_i8_round.wgsl, step per sub-block as
// llama.cpp's GPU GEMV rounds x) and stores, for super-block b of the stage and row r (B = r * SB + b, SB =
// STAGED_BLOCKS): its word w at component s / 2 of xq_stage[(8 B + w) * 2 + h], h = its parity (s % 2) XOR
// (w / 4) % 2 (so lane t's two 16-byte reads, the even and the odd sub-blocks, fall on 8 bank groups a quarter
// warp); its step at component s / 2 of xs_step[2 B + s % 2]; step * (the sum of its values) and its x^2 (the
// fused norm's) at xs_own[8 B + s], which lane s of the block adds (its sub-block's min, its share of x^2).
const STAGE_X: u32 = 1u;
const_assert LPB == 8u && XB == 64u;  // 8 lanes a 256-weight super-block

var<workgroup> xq_stage: array<vec4<u32>, STAGED_BLOCKS * 16u * MAX_ROWS>;
var<workgroup> xs_step: array<vec4<f32>, STAGED_BLOCKS * 2u * MAX_ROWS>;
var<workgroup> xs_own: array<vec2<f32>, STAGED_BLOCKS * 8u * MAX_ROWS>;

struct XPart {
  even: vec4<u32>,     // x word t of sub-blocks 0, 2, 4, 6 (4 int8 values each)
  odd: vec4<u32>,      // of sub-blocks 1, 3, 5, 7
  st_even: vec4<f32>,  // their steps (x' = step * value)
  st_odd: vec4<f32>,
  own: f32,            // the sum of x' over sub-block t (as rounded): its min's factor
  sum_even: vec4<f32>,  // step * (the sum of the 4 values of x word t) of sub-blocks 0, 2, 4, 6 (Q2_K's mins,
  sum_odd: vec4<f32>,   // a 16 weights); of 1, 3, 5, 7
}

//!include quant_i8_round.wgsl
//!include quant_x_i8_lane_norms.wgsl

// Stage `run`'s super-blocks of x (the STAGE_STEPS steps from step run * STAGE_STEPS; rows row0 .. row0 + rows of
// the chunk; zeros past the row's end)
fn stage_x(t: u32, run: u32, row0: u32, rows: u32) {
  for (var v = t; v < STAGED_BLOCKS * 8u * MAX_ROWS; v = v + THREADS) {
    let r = v / (STAGED_BLOCKS * 8u);
    let b = (v / 8u) % STAGED_BLOCKS;
    let s = v % 8u;
    let x8 = round_block(row0, r, rows, (run * STAGED_BLOCKS + b) * 8u + s);
    let base = r * STAGED_BLOCKS + b;
    //!repeat W 8
    xq_stage[(8u * base + ${W}u) * 2u + ((s % 2u) ^ (${W}u / 4u))][s / 2u] = x8.q[$W];
    //!end
    xs_step[2u * base + s % 2u][s / 2u] = x8.step;
    xs_own[8u * base + s] = vec2<f32>(x8.step * x8.sum, x8.sq);
  }
}

// Lane t's part of super-block blk of row r of the chunk, from the stage (its f32 vectors unused: xs stays zero)
fn row_x(row0: u32, r: u32, blk: u32, t: u32, g: array<vec4<f32>, XV>) -> RowX {
  let base = r * STAGED_BLOCKS + blk % STAGED_BLOCKS;
  let flip = (t / 4u) % 2u;
  let own = xs_own[8u * base + t];
  let even = xq_stage[(8u * base + t) * 2u + flip];
  let odd = xq_stage[(8u * base + t) * 2u + (1u ^ flip)];
  let st_even = xs_step[2u * base];
  let st_odd = xs_step[2u * base + 1u];
  var rx: RowX;
  rx.xp = XPart(even, odd, st_even, st_odd, own.x, st_even * exact_f32(word_sums(even)),
                st_odd * exact_f32(word_sums(odd)));
  rx.sq = own.y;
  return rx;
}

// The sums of the 4 int8 values of each word
fn word_sums(w: vec4<u32>) -> vec4<i32> {
  let ones = 0x01010101u;
  return vec4<i32>(dot4I8Packed(w.x, ones), dot4I8Packed(w.y, ones), dot4I8Packed(w.z, ones), dot4I8Packed(w.w, ones));
}
