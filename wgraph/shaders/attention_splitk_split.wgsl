// Keys per chunk: the fewest whole steps that split `span` into at most num_chunks chunks.
fn splitk_chunk(span: u32) -> u32 {
    let per = (span + params.num_chunks - 1u) / params.num_chunks;
    return max(CHUNK_STEP, (per + CHUNK_STEP - 1u) / CHUNK_STEP * CHUNK_STEP);
}

fn splitk_count(span: u32) -> u32 {
    let chunk = splitk_chunk(span);
    return (span + chunk - 1u) / chunk;
}