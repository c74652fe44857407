// RoPE (rotate-half, as rope.wgsl) of q and k and the KV-cache append of k and v, in one dispatch, from the
// output of one linear over stacked [Wq; Wk; Wv]: qkv [rows, q_heads + 2 kv_heads, head_dim] f32. Row r sits at
// position pos + r (+ pos_buf[0]); its q heads go to q (f32), its k heads, rotated, and its v heads to the
// caches (T: f32 or f16) at that position's cache row (kv_common.wgsl: contiguous, ring or paged). One thread
// per (row, head, i < half) writes elements i and i + half. A position beyond the tables writes q as zeros
// and no cache row; one beyond the cache writes no cache row; both are reported on the device error flag.
{{ENABLE}}

struct RopeKVParams {
//!include rope_kv_fields.wgsl
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

//!include rope_kv_pair.wgsl

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
  rope_kv_write(r, h, i, a, b);
}
