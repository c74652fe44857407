// out[s, h] = W[ids[s], h] for a [V, H] table held as GGML blocks (wgraph/ggml_blocks.py): the rows that u32
// ids pick, dequantized to f32, one weight per thread (a token's row is read once per step: no need for speed).
// An id >= V (possible when the ids come from the GPU, as a decode step's sampled token) writes its row as
// zeros and is reported on the device error flag; the host checks ids it knows before any GPU work.
struct QuantEmbeddingParams {
  n: u32,  // ids x H outputs
  hidden: u32,
  vocab: u32,
  row_blocks: u32,  // blocks per table row: H / BLOCK_WEIGHTS
}

@group(0) @binding(0) var<uniform> params: QuantEmbeddingParams;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> blocks: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
//!include device_errors.wgsl
//!include quant_common.wgsl

const BLOCK_WEIGHTS: u32 = {{BLOCK_WEIGHTS}}u;  // the matrix row's layout (wgraph/ggml_blocks.py FORMATS)
const BLOCK_BYTES: u32 = {{BLOCK_BYTES}}u;

fn byte_at(i: u32) -> u32 {
  return (blocks[i / 4u] >> (8u * (i % 4u))) & 0xFFu;
}

// The u16 at byte i (even: every field of 2 bytes or more in these formats is 2-byte aligned, so it lies in one word)
fn u16_at(i: u32) -> u32 {
  return (blocks[i / 4u] >> (8u * (i % 4u))) & 0xFFFFu;
}

// The u32 and the f16 at byte i (even)
fn u32_at(i: u32) -> u32 {
  return u16_at(i) | (u16_at(i + 2u) << 16u);
}

fn half_at(i: u32) -> f32 {
  return unpack2x16float(u16_at(i)).x;
}

// Word i of the format's table, after the table's blocks (ggml_blocks.BlockFormat.table_at)
fn table_word(i: u32) -> u32 {
  return blocks[(params.vocab * params.row_blocks * BLOCK_BYTES + 19u) / 16u * 4u + i];
}

//!include {{QTYPE_WEIGHT}}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  // t, s, h, id: output t is element h of token s, whose table row is ids[s] (returns past the n outputs)
//!include embedding_ids.wgsl
  if (id >= params.vocab) {
    if (h == 0u) {
      report_error(ERR_EMBEDDING_ID, id, params.vocab);
    }
    out[t] = 0.0;
    return;
  }
  out[t] = weight_at(id * params.row_blocks + h / BLOCK_WEIGHTS, h % BLOCK_WEIGHTS);
}
