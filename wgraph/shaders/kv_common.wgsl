// Shared by the kv_* kernels (included, not a variant). Maps a logical position to a cache row.
// layout: 0 contiguous (row = t), 1 ring of `ring` rows (row = t % ring), 2 paged (page_table[t / page_size]).
// Returns 0xFFFFFFFF when t is outside the cache (the op checks this on the host when the position is an int).
fn kv_row(t: u32, dst_layout: u32, capacity: u32, page_size: u32) -> u32 {
    if (dst_layout == 1u) {
        return t % capacity;
    }
    if (t >= capacity) {
        return 0xFFFFFFFFu;
    }
    if (dst_layout == 2u) {
        let page = t / page_size;
        if (page >= arrayLength(&page_table)) {
            return 0xFFFFFFFFu;
        }
        return page_table[page] * page_size + t % page_size;
    }
    return t;
}

// Position of row r: the uniform bias plus, when use_pos_buf is set, the u32 in pos_buf[0].
// Negative means "no such row yet" (a hot -> cold move before the ring is full) and is skipped.
fn kv_pos(r: u32, bias: i32, use_pos_buf: u32) -> i32 {
    var base = bias;
    if (use_pos_buf != 0u) {
        base = base + i32(pos_buf[0]);
    }
    return base + i32(r);
}

// Cache row and source row of row r of an append or a hot -> cold move, as vec2(dst, src). dst is 0xFFFFFFFF when
// row r is skipped (its position is negative or outside the cache); src is then not computed. Reads the including
// kernel's params: pos, use_pos_buf, dst_layout, capacity, page_size, src_layout, src_ring, src_row0.
fn kv_rows(r: u32) -> vec2<u32> {
    let t = kv_pos(r, params.pos, params.use_pos_buf);
    if (t < 0) {
        return vec2<u32>(0xFFFFFFFFu, 0u);
    }
    let row = kv_row(u32(t), params.dst_layout, params.capacity, params.page_size);
    if (row == 0xFFFFFFFFu) {
        return vec2<u32>(row, 0u);
    }
    var src_row = params.src_row0 + r;
    if (params.src_layout == 1u) {
        src_row = u32(t) % params.src_ring;
    }
    return vec2<u32>(row, src_row);
}
