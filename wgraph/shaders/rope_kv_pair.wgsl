// The per-pair step of RoPE + K/V append (included by rope_kv_append.wgsl, gemv_rope_kv.wgsl and
// quant_gemv_rope_kv.wgsl, whose params hold rope_kv_fields.wgsl and bind cos_t, sin_t, page_table, pos_buf,
// q, k_cache, v_cache of {{T}}):
// rope_kv_write(r, h, i, a, b) takes elements i and i + half (a, b) of head h of row r of the stacked
// [q heads; k heads; v heads]: q heads are rotated (rotate-half) into q [rows, q_heads, D] f32, k heads rotated
// into k_cache and v heads as they are into v_cache at row r's cache row (kv_common.wgsl's kv_rows). A position
// beyond the tables writes q as zeros and no cache row; one beyond the cache writes no cache row; both are
// reported on the device error flag.
//!include kv_common.wgsl
const KV_ERROR_SITE: u32 = ERR_KV_APPEND_POS;

fn rope_kv_write(r: u32, h: u32, i: u32, a: f32, b: f32) {
  let half = params.half;
  if (h >= params.q_heads + params.kv_heads) {
    let rows = kv_rows(r);
    if (rows.x != 0xFFFFFFFFu) {
      let at = (rows.x * params.kv_heads + h - params.q_heads - params.kv_heads) * 2u * half;
      v_cache[at + i] = {{T}}(a);
      v_cache[at + i + half] = {{T}}(b);
    }
    return;
  }
  let p = kv_pos(r);
  let in_table = p.y != 0 && p.x >= 0 && u32(p.x) < params.table_rows;
  var c = 0.0;
  var s = 0.0;
  if (in_table) {
    c = cos_t[u32(p.x) * half + i];
    s = sin_t[u32(p.x) * half + i];
  } else if (p.y != 0) {
    report_error(ERR_ROPE_POS, u32(max(p.x, 0)), params.table_rows);
  }
  let ya = a * c - b * s;
  let yb = b * c + a * s;
  if (h < params.q_heads) {
    let at = (r * params.q_heads + h) * 2u * half;
    q[at + i] = ya;
    q[at + i + half] = yb;
    return;
  }
  if (!in_table) {
    return;
  }
  let rows = kv_rows(r);
  if (rows.x != 0xFFFFFFFFu) {
    let at = (rows.x * params.kv_heads + h - params.q_heads) * 2u * half;
    k_cache[at + i] = {{T}}(ya);
    k_cache[at + i + half] = {{T}}(yb);
  }
}
