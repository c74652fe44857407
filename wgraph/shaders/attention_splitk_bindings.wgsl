//!include attention_params.wgsl
//!include attention_decode_splitk_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;   // 16-byte pieces: ELEMS dims each
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read_write> part_ml: array<f32>;
@group(0) @binding(8) var<storage, read_write> part_acc: array<f32>;