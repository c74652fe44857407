// How the batched split-K decode splits one sequence's visible keys into chunks; shared by its main and
// combine kernels, which must agree (the consts come from one registry define set). Mirrors
// attention_decode_splitk_common.wgsl. Needs attention_batched_common.wgsl and the const CHUNK_STEP.

// Keys per chunk: the fewest whole steps that split `span` into at most num_chunks chunks.
fn split_chunk(span: u32) -> u32 {
    let per = (span + params.num_chunks - 1u) / params.num_chunks;
    return max(CHUNK_STEP, (per + CHUNK_STEP - 1u) / CHUNK_STEP * CHUNK_STEP);
}

fn split_count(span: u32) -> u32 {
    let chunk = split_chunk(span);
    return (span + chunk - 1u) / chunk;
}
