// The split-K fused kernels' stores for attention_fused_merge.wgsl: a chunk's merged (m, l) and weighted acc of
// each head of the block go to the partial buffers part_ml / part_acc (declared by the kernel), which the combine
// pass merges over the chunks. part_slot: the partial slot of the block's first head in this chunk, set by main.
var<private> part_slot: u32;

fn store_ml(hh: u32, m: f32, l: f32) {
    let at = (part_slot + hh * params.num_chunks) * 2u;
    part_ml[at] = m;
    part_ml[at + 1u] = l;
}

fn store_acc(hh: u32, d: u32, sum: f32, l: f32) {
    part_acc[(part_slot + hh * params.num_chunks) * params.head_dim + d] = sum;
}
