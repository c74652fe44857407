// rope_kv_append's per-sequence twin for a batched decode step: row b of qkv [B, q_heads + 2 kv_heads, head_dim]
// (f32, one linear over stacked [Wq; Wk; Wv]) is the new token of sequence b, at that sequence's own position
// pos[b] (a GPU value). Its q heads, rotated (rotate-half RoPE from the cos/sin tables), go to q [B, q_heads,
// head_dim] (f32); its k heads, rotated, and its v heads go to row pos[b] of sequence b's cache ([B, capacity,
// kv_heads, head_dim], T: f32 or f16). One thread per (row, head, i < half) writes elements i and i + half. A
// position beyond the tables writes q as zeros and no cache row; one beyond the capacity writes no cache row;
// both are reported on the device error flag (the sites of rope and kv_append). A position beyond both is
// reported as rope's alone: every thread that sees it checks the tables first (the flag keeps the first report
// to land, and which workgroup's lands first is a race on a GPU).
{{ENABLE}}

struct RopeKVBatchedParams {
  batch: u32,
  q_heads: u32,
  kv_heads: u32,
  half: u32,
  table_rows: u32,
  capacity: u32,
}

@group(0) @binding(0) var<uniform> params: RopeKVBatchedParams;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> cos_t: array<f32>;
@group(0) @binding(3) var<storage, read> sin_t: array<f32>;
@group(0) @binding(4) var<storage, read> pos: array<u32>;
@group(0) @binding(5) var<storage, read_write> q: array<f32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<{{T}}>;

//!include device_errors.wgsl

// The first element of sequence b's row p, kv head kh, in a cache [B, capacity, kv_heads, 2 * half].
fn cache_at(b: u32, p: u32, kh: u32) -> u32 {
  return ((b * params.capacity + p) * params.kv_heads + kh) * 2u * params.half;
}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let idx = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  let heads = params.q_heads + 2u * params.kv_heads;
  let half = params.half;
  if (idx >= params.batch * heads * half) {
    return;
  }
  let i = idx % half;
  let rh = idx / half;  // row * heads + head
  let h = rh % heads;
  let b = rh / heads;
  let a = qkv[rh * 2u * half + i];
  let c2 = qkv[rh * 2u * half + i + half];
  let p = pos[b];
  let in_cache = p < params.capacity;
  if (h >= params.q_heads + params.kv_heads) {
    if (p >= params.table_rows) {
      return;   // past the tables: no cache row (the q and k heads' threads report it, as rope's)
    }
    if (!in_cache) {
      report_error(ERR_KV_APPEND_POS, p, params.capacity);
      return;
    }
    let at = cache_at(b, p, h - params.q_heads - params.kv_heads);
    v_cache[at + i] = {{T}}(a);
    v_cache[at + i + half] = {{T}}(c2);
    return;
  }
  let in_table = p < params.table_rows;
  var c = 0.0;
  var s = 0.0;
  if (in_table) {
    c = cos_t[p * half + i];
    s = sin_t[p * half + i];
  } else {
    report_error(ERR_ROPE_POS, p, params.table_rows);
  }
  let ya = a * c - c2 * s;
  let yb = c2 * c + a * s;
  if (h < params.q_heads) {
    let at = (b * params.q_heads + h) * 2u * half;
    q[at + i] = ya;
    q[at + i + half] = yb;
    return;
  }
  if (!in_table) {
    return;
  }
  if (!in_cache) {
    report_error(ERR_KV_APPEND_POS, p, params.capacity);
    return;
  }
  let at = cache_at(b, p, h - params.q_heads);
  k_cache[at + i] = {{T}}(ya);
  k_cache[at + i + half] = {{T}}(yb);
}
