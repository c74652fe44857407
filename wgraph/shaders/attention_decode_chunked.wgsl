// Chunked (split-kv) online-softmax decode, pass 1: workgroup (c, h, i) attends query i, q head h over
// chunk c of its visible keys, [lo + c * chunk_size, lo + (c + 1) * chunk_size), with the streaming core,
// and writes the chunk's unnormalised (m, l, acc) to part_ml / part_acc. num_chunks is planned from the
// k/v capacity, so a kv_len read from the GPU never needs more chunks; surplus chunks write l = 0.
// attention_decode_combine.wgsl merges the chunks. Dispatch: (num_chunks, num_heads, seq_len).
{{ENABLE_F16}}
//!include attention_params.wgsl
//!include attention_kv.wgsl
//!include attention_stream_core.wgsl
@group(0) @binding(7) var<storage, read_write> part_ml: array<f32>;
@group(0) @binding(8) var<storage, read_write> part_acc: array<f32>;

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let c = wid.x;
    let h = wid.y;
    let i = wid.z;
    let kv_len = kv_len_now();
    let range = key_range(query_pos(i, kv_len), kv_len);
    let lo = min(range.x + c * params.chunk_size, range.y);
    let hi = min(lo + params.chunk_size, range.y);
    var acc: array<f32, DIMS_PER_THREAD>;
    let ml = attend_range(i, h, t, lo, hi, &acc);
    let slot = (i * params.num_heads + h) * params.num_chunks + c;
    if (t == 0u) {
        part_ml[slot * 2u] = ml.x;
        part_ml[slot * 2u + 1u] = ml.y;
    }
    for (var n: u32 = 0u; n < DIMS_PER_THREAD; n++) {
        let d = t + n * WG;
        if (d < params.head_dim) {
            part_acc[slot * params.head_dim + d] = acc[n];
        }
    }
}
