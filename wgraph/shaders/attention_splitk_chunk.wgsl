    if (c >= splitk_count(span)) {
        return;                                  // the whole workgroup: a surplus chunk
    }
    let chunk = splitk_chunk(span);
    let lo = range.x + c * chunk;
    let n = min(chunk, range.y - lo);