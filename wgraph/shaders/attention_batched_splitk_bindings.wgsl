//!include attention_batched_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;   // 16-byte pieces: ELEMS dims each
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(9) var<storage, read_write> part_ml: array<f32>;
@group(0) @binding(10) var<storage, read_write> part_acc: array<f32>;

//!include attention_batched_chunks.wgsl