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
const KV_PAGE_ERROR_SITE: u32 = ERR_KV_APPEND_PAGE;

fn cache_rows() -> u32 {
    return arrayLength(&k_cache) / (params.kv_heads * 2u * params.half);
}

// Where a pair goes and with what rotation: kind 0 q (at: q's element), 1 k (at: k_cache's), 2 v (v_cache's), 3
// nowhere; c, s: cos and sin of the row's position (k and q).
struct RopeKvTarget {
  kind: u32,
  at: u32,
  c: f32,
  s: f32,
}

// Everything rope_kv_write loads for element i of head h of row r (the position, cos and sin, the cache row),
// and the error reports: the GEMV kernels take it before their sums, so its loads are not a chain at the end.
fn rope_kv_target(r: u32, h: u32, i: u32) -> RopeKvTarget {
  let half = params.half;
  let p = kv_pos(r);  // read once: the cache row below comes from it too (kv_rows_at)
  let in_table = p.y != 0 && p.x >= 0 && u32(p.x) < params.table_rows;
  if (h >= params.q_heads + params.kv_heads) {
    // a position past the tables writes no cache row: the q heads' threads report it (as rope's) and the k heads'
    // skip it, so v's do, before kv_rows_at could report it past the cache too (the flag keeps the first report
    // to land: which workgroup's lands first is a race on a GPU)
    if (!in_table) {
      return RopeKvTarget(3u, 0u, 0.0, 0.0);
    }
    let rows = kv_rows_at(r, p);
    if (rows.x == 0xFFFFFFFFu) {
      return RopeKvTarget(3u, 0u, 0.0, 0.0);
    }
    return RopeKvTarget(2u, (rows.x * params.kv_heads + h - params.q_heads - params.kv_heads) * 2u * half + i,
                        0.0, 0.0);
  }
  var c = 0.0;
  var s = 0.0;
  if (in_table) {
    c = cos_t[u32(p.x) * half + i];
    s = sin_t[u32(p.x) * half + i];
  } else if (p.y != 0) {
    report_error(ERR_ROPE_POS, select(u32(p.x), 0xFFFFFFFFu, p.x < 0), params.table_rows);  // negative: as kv_append's
  }
  if (h < params.q_heads) {
    return RopeKvTarget(0u, (r * params.q_heads + h) * 2u * half + i, c, s);
  }
  if (!in_table) {
    return RopeKvTarget(3u, 0u, 0.0, 0.0);
  }
  let rows = kv_rows_at(r, p);
  if (rows.x == 0xFFFFFFFFu) {
    return RopeKvTarget(3u, 0u, 0.0, 0.0);
  }
  return RopeKvTarget(1u, (rows.x * params.kv_heads + h - params.q_heads) * 2u * half + i, c, s);
}

// The pair (a, b) stored where `t` says: q rotated (zeros beyond the tables: c = s = 0), k rotated, v as it is.
fn rope_kv_store(t: RopeKvTarget, a: f32, b: f32) {
  let half = params.half;
  let ya = a * t.c - b * t.s;
  let yb = b * t.c + a * t.s;
  if (t.kind == 0u) {
    q[t.at] = ya;
    q[t.at + half] = yb;
  } else if (t.kind == 1u) {
    k_cache[t.at] = {{T}}(ya);
    k_cache[t.at + half] = {{T}}(yb);
  } else if (t.kind == 2u) {
    v_cache[t.at] = {{T}}(a);
    v_cache[t.at + half] = {{T}}(b);
  }
}

fn rope_kv_write(r: u32, h: u32, i: u32, a: f32, b: f32) {
  rope_kv_store(rope_kv_target(r, h, i), a, b);
}
