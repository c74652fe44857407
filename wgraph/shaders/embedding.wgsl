// out[s, h] = table[ids[s], h]: the rows of a [V, H] table that u32 ids pick (TABLE_READ may widen f16 or bf16 to
// f32; a bf16 table into bf16 rows is gathered as u32 words, H counting words). An id >= V (possible when the
// ids come from the GPU, as a decode step's sampled token) writes its row as zeros and is reported on the
// device error flag; the host checks ids it knows before any GPU work.
{{ENABLE}}
struct EmbeddingParams {
  n: u32,  // ids x H outputs
  hidden: u32,
  vocab: u32,
}

@group(0) @binding(0) var<uniform> params: EmbeddingParams;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> table: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{OUT_T}}>;
//!include device_errors.wgsl
//!include {{TABLE_READ}}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  // t, s, h, id: output t is element h of token s, whose table row is ids[s] (returns past the n outputs)
//!include embedding_ids.wgsl
  if (id >= params.vocab) {
    if (h == 0u) {
      report_error(ERR_EMBEDDING_ID, id, params.vocab);
    }
    out[t] = {{OUT_T}}(0.0);
    return;
  }
  out[t] = table_at(id * params.hidden + h);
}
