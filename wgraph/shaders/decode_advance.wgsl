// One decode step's bookkeeping on the GPU, for B sequences (decode_advance: B = 1; decode_advance_batched):
// for each sequence b, the id just chosen becomes its next input token, is kept at its next position in its row
// of the position-indexed history [B, history_len], and its position and kv_len move on by one. One invocation
// per sequence. A GPU position past 2^32 - 3 would wrap (pos + 1 or kv_len = pos + 2 past u32: kv_len 0, or the
// position back to 0 over history[0]): that sequence is left as it was and the device error flag names it.
struct AdvanceParams {
  batch: u32,
  history_len: u32,
}

@group(0) @binding(0) var<uniform> params: AdvanceParams;
@group(0) @binding(1) var<storage, read> next_id: array<u32>;
@group(0) @binding(2) var<storage, read_write> token: array<u32>;
@group(0) @binding(3) var<storage, read_write> history: array<u32>;
@group(0) @binding(4) var<storage, read_write> pos: array<u32>;
@group(0) @binding(5) var<storage, read_write> kv_len: array<u32>;
//!include device_errors.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = gid.x;
  if (b >= params.batch) {
    return;
  }
  let t = next_id[b];
  let now = pos[b];
  if (now > 4294967293u) {   // the largest position whose kv_len (now + 2) fits u32
    report_error(ERR_DECODE_POSITION, now, 4294967293u);
    return;
  }
  let p = now + 1u;
  token[b] = t;
  if (p < params.history_len) {
    history[b * params.history_len + p] = t;
  }
  pos[b] = p;
  kv_len[b] = p + 1u;
}
