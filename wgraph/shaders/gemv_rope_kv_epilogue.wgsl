// What gemv_rope_kv.wgsl (f16/f32 W) and quant_gemv_rope_kv.wgsl (GGML blocks) share, included after their GEMV
// core (tot, FT, MAX_ROWS, LANES, row_scale; params.n, half, slots, has_bias; bias) and rope_kv_pair.wgsl
// (rope_kv_write): W's rows read in pair order (w_row), and the epilogue that hands each slot's pairs (a, b) to
// rope_kv_write for x rows row0 .. row0 + rows - 1 (the GPU position read before the sums: prepare_epilogue).

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

// A slot's (pair, x row) outputs are lanes' o = lane < FT / 2 * MAX_ROWS: one each. The GPU position is read
// before the GEMV's sums (prepare_epilogue: a load nothing waits on until the epilogue, so the sums' loads issue
// behind it); the rest of rope_kv_target's loads depend on it and stay in the epilogue: taken before the sums
// they held every lane's first weight loads back (in-order issue), ~1.6 us on the 1B call.
const_assert FT / 2u * MAX_ROWS <= LANES;

fn prepare_epilogue(slot: u32, lane: u32, row0: u32, rows: u32) {
  if (params.use_pos_buf != 0u) {
    pos_early = pos_buf[0];
    pos_early_set = true;
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
    rope_kv_write(row0 + r, p / params.half, p % params.half, a, b);
  }
}
