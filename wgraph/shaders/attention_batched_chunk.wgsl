    // Workgroup (c, g * blocks + blk, b): chunk c of sequence b's visible keys, q heads blk * G_TILE .. + ng of
    // kv head g. Shared by the batched split-K decode kernels (attention_batched_decode.wgsl, _fused.wgsl).
    let c = wid.x;
//!include attention_batched_head.wgsl
    let span = range.y - range.x;
//!include attention_splitk_chunk.wgsl
    let qrow = sq.x + sq.y - 1u;
