    let b = wid.z;
    let D = params.head_dim;
    let group = params.num_heads / params.num_kv_heads;
    let blocks = (group + G_TILE - 1u) / G_TILE;
    let c = wid.x / blocks;
    let g = wid.y;
    let blk = wid.x % blocks;
//!include attention_batched_seq.wgsl