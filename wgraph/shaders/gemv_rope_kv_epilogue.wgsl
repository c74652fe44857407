// What gemv_rope_kv.wgsl (f16/f32 W) and quant_gemv_rope_kv.wgsl (GGML blocks) share, included after their GEMV
// core (tot, FT, MAX_ROWS, LANES, row_scale; params.n, half, slots, has_bias; bias) and rope_kv_pair.wgsl
// (rope_kv_target, rope_kv_store): W's rows read in pair order (w_row), and the epilogue that stores each slot's
// pairs (a, b) for x rows row0 .. row0 + rows - 1 where prepare_epilogue (called before the sums) found them.

// pair order -> row of W (D = 2 half per head)
fn w_row(p: u32) -> u32 {
  let half = params.half;
  let pairs = params.n / 2u;
  if (p < pairs) {
    return p / half * 2u * half + p % half;
  }
  let e = p - pairs;
  return e / half * 2u * half + half + e % half;
}

// A slot's (pair, x row) outputs are lanes' o = lane < FT / 2 * MAX_ROWS: one each. With EPILOGUE_AHEAD (the
// registry's epilogue_ahead) each lane's target (rope_kv_target: the position, cos / sin and cache row, a chain
// of dependent loads) is taken before the GEMV's sums and held in rope_target, so the epilogue only rotates and
// stores; without it the epilogue takes it after the reduction. Ahead, the chain delays the lanes' first weight
// loads (in-order issue): on the H200 it took the 8B call (K 4096) from 22.3 to 20.3 us and the 1B one (K 2048)
// from 7.6 to 9.2 (h200-rope-ahead.log), hence a per-variant choice.
const EPILOGUE_AHEAD: bool = {{EPILOGUE_AHEAD}}u != 0u;
const_assert FT / 2u * MAX_ROWS <= LANES;
var<private> rope_target: RopeKvTarget;

fn prepare_epilogue(slot: u32, lane: u32, row0: u32, rows: u32) {
  let r = lane % MAX_ROWS;
  if (EPILOGUE_AHEAD && slot < params.slots && lane < FT / 2u * MAX_ROWS && r < rows) {
    let p = slot + (lane / MAX_ROWS) * params.slots;  // < n / 2: slot < slots = n / FT
    rope_target = rope_kv_target(row0 + r, p / params.half, p % params.half);
  }
}

fn rope_kv_epilogue(slot: u32, at: u32, lane: u32, row0: u32, rows: u32) {
  let o = lane;
  let r = o % MAX_ROWS;
  if (o < FT / 2u * MAX_ROWS && r < rows) {
    let p = slot + (o / MAX_ROWS) * params.slots;
    let scale = row_scale(at, r);
    var a = tot[at + o] * scale;
    var b = tot[at + o + FT / 2u * MAX_ROWS] * scale;
    if (params.has_bias != 0u) {
      a = a + bias[w_row(p)];
      b = b + bias[w_row(p + params.n / 2u)];
    }
    if (!EPILOGUE_AHEAD) {
      rope_target = rope_kv_target(row0 + r, p / params.half, p % params.half);
    }
    rope_kv_store(rope_target, a, b);
  }
}
