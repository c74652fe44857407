// RoPE (rotate-half, as rope.wgsl) of q and k and the KV-cache append of k and v, in one dispatch, from the
// output of one linear over stacked [Wq; Wk; Wv]: qkv [rows, q_heads + 2 kv_heads, head_dim] f32. Row r sits at
// position pos + r (+ pos_buf[0]); its q heads go to q (f32), its k heads, rotated, and its v heads to the
// caches (T: f32 or f16) at that position's cache row (kv_common.wgsl: contiguous, ring or paged). One thread
// per (row, head, i < half) writes elements i and i + half. A position beyond the tables writes q as zeros
// and no cache row; one beyond the cache writes no cache row; both are reported on the device error flag.
{{ENABLE}}

struct RopeKVParams {
  n_rows: u32,
  q_heads: u32,
  kv_heads: u32,
  half: u32,
  table_rows: u32,
  capacity: u32,
  dst_layout: u32,
  page_size: u32,
  pos: i32,
  use_pos_buf: u32,
  src_layout: u32,  // read by kv_common's kv_rows: 0, the rows of qkv in order
  src_ring: u32,
  src_row0: u32,
}

@group(0) @binding(0) var<uniform> params: RopeKVParams;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> cos_t: array<f32>;
@group(0) @binding(3) var<storage, read> sin_t: array<f32>;
@group(0) @binding(4) var<storage, read> page_table: array<u32>;
@group(0) @binding(5) var<storage, read> pos_buf: array<u32>;
@group(0) @binding(6) var<storage, read_write> q: array<f32>;
@group(0) @binding(7) var<storage, read_write> k_cache: array<{{T}}>;
@group(0) @binding(8) var<storage, read_write> v_cache: array<{{T}}>;

//!include kv_common.wgsl
const KV_ERROR_SITE: u32 = ERR_KV_APPEND_POS;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let idx = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  let heads = params.q_heads + 2u * params.kv_heads;
  let half = params.half;
  if (idx >= params.n_rows * heads * half) {
    return;
  }
  let i = idx % half;
  let rh = idx / half;  // row * heads + head
  let h = rh % heads;
  let r = rh / heads;
  let a = qkv[rh * 2u * half + i];
  let b = qkv[rh * 2u * half + i + half];
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
