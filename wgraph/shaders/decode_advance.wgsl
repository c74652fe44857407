// One decode step's bookkeeping, on the GPU: the id just chosen becomes the next step's input token, is kept
// in the position-indexed history, and the position and kv_len move on by one. One invocation.
struct AdvanceParams {
  history_len: u32,
}

@group(0) @binding(0) var<uniform> params: AdvanceParams;
@group(0) @binding(1) var<storage, read> next_id: array<u32>;
@group(0) @binding(2) var<storage, read_write> token: array<u32>;
@group(0) @binding(3) var<storage, read_write> history: array<u32>;
@group(0) @binding(4) var<storage, read_write> pos: array<u32>;
@group(0) @binding(5) var<storage, read_write> kv_len: array<u32>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main() {
  let t = next_id[0];
  let p = pos[0] + 1u;
  token[0] = t;
  if (p < params.history_len) {
    history[p] = t;
  }
  pos[0] = p;
  kv_len[0] = p + 1u;
}
