//!include attention_params.wgsl
@group(0) @binding(1) var<storage, read> q: array<vec4<{{Q_T}}>>;
//!include {{KV_VEC4}}
@group(0) @binding(4) var<storage, read> kv_len_buf: array<u32>;
@group(0) @binding(5) var<storage, read> page_table: array<u32>;
@group(0) @binding(6) var<storage, read_write> out: array<vec4<{{OUT_T}}>>;
@group(0) @binding(10) var<storage, read_write> lse: array<f32>;   // [Hq, S]; a 4-byte fallback unless write_lse
//!include attention_kv_layout.wgsl