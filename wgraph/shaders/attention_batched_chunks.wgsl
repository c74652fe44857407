// The chunk consts of the batched split-K decode (one registry define set for its main and combine kernels)
// and the chunk split, the single-sequence split-K's (attention_splitk_split.wgsl: a function of the visible
// span and the uniform num_chunks, so a sequence shorter than the grid was planned for leaves its surplus
// chunks idle). Shared by attention_batched_decode.wgsl and attention_batched_fused.wgsl;
// attention_batched_combine.wgsl needs only CHUNK_STEP and the split.
const CHUNK_STEP: u32 = {{CHUNK_STEP}}u;
const CHUNK_MAX: u32 = {{CHUNK_MAX}}u;
const G_TILE: u32 = {{G_TILE}}u;
const SPLIT_TARGET: u32 = {{SPLIT_TARGET}}u; // workgroups the planner aims for (chunks x kv heads x blocks x B)
const_assert CHUNK_MAX % CHUNK_STEP == 0u;
//!include attention_splitk_split.wgsl
