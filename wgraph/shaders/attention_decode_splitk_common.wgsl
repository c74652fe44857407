// Shared by the split-K decode kernels (prepare, main, combine): how the visible keys of the one query are
// split into chunks. The split is a function of the visible span and the uniform num_chunks (the most
// chunks the partial buffers hold), so the prepare kernel, the main kernel and the combine kernel derive
// the same chunk count from a kv_len read on the GPU; attention_chunks.splitk_chunks mirrors it for an
// int kv_len and makes num_chunks large enough that no chunk exceeds CHUNK_MAX keys (the main kernel keeps
// a chunk's scores in workgroup memory). Needs attention_params.wgsl first and the defines CHUNK_STEP,
// CHUNK_MAX, G_TILE, SPLIT_TARGET.
//!include attention_decode_keys.wgsl

const CHUNK_STEP: u32 = {{CHUNK_STEP}}u;   // chunks are whole multiples of this many keys
const CHUNK_MAX: u32 = {{CHUNK_MAX}}u;     // the most keys in one chunk
const G_TILE: u32 = {{G_TILE}}u;           // q heads of one kv head a workgroup serves at once
const SPLIT_TARGET: u32 = {{SPLIT_TARGET}}u; // workgroups the planner aims for (chunks x kv heads x head blocks)
const_assert CHUNK_MAX % CHUNK_STEP == 0u;

// Workgroups along z: blocks of G_TILE q heads per kv head.
fn head_blocks() -> u32 {
    let group = params.num_heads / params.num_kv_heads;
    return (group + G_TILE - 1u) / G_TILE;
}

//!include attention_splitk_split.wgsl
