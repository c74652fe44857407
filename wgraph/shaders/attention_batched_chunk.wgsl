    // Workgroup (c, g * blocks + blk, b): chunk c of sequence b's visible keys, q heads blk * G_TILE .. + ng of
    // kv head g. Shared by the batched split-K decode kernels (attention_batched_decode.wgsl, _fused.wgsl).
    let c = wid.x;
//!include attention_batched_head.wgsl
    let span = range.y - range.x;
    if (c >= splitk_count(span)) {
        return;                                  // the whole workgroup: a surplus chunk
    }
    let chunk = splitk_chunk(span);
    let lo = range.x + c * chunk;
    let n = min(chunk, range.y - lo);
    let qrow = sq.x + sq.y - 1u;
