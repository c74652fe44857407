// Shared by the kv_* kernels (included, not a variant). Maps a logical position to a cache row. The including
// kernel declares KV_ERROR_SITE (a position outside the cache), KV_PAGE_ERROR_SITE (a page id past the pool) and
// fn cache_rows() -> u32, the rows its cache buffer holds.
//!include device_errors.wgsl

const KV_NO_ROW: u32 = 0xFFFFFFFFu;     // outside the cache: reported by kv_rows
const KV_BAD_PAGE: u32 = 0xFFFFFFFEu;   // a page id past the pool: reported by kv_row

// layout: 0 contiguous (row = t), 1 ring of `ring` rows (row = t % ring), 2 paged (page_table[t / page_size]).
// Returns KV_NO_ROW when t is outside the cache (the op checks this on the host when the position is an int),
// KV_BAD_PAGE (reported here) when the table's page id is past the pages of the cache buffer.
fn kv_row(t: u32, dst_layout: u32, capacity: u32, page_size: u32) -> u32 {
    if (dst_layout == 1u) {
        return t % capacity;
    }
    if (t >= capacity) {
        return KV_NO_ROW;
    }
    if (dst_layout == 2u) {
        let page = t / page_size;
        if (page >= arrayLength(&page_table)) {
            return KV_NO_ROW;
        }
        let id = page_table[page];
        let pages = cache_rows() / page_size;
        if (id >= pages) {
            report_error(KV_PAGE_ERROR_SITE, id, pages);
            return KV_BAD_PAGE;
        }
        return id * page_size + t % page_size;
    }
    return t;
}

// Position of row r: the uniform bias plus, when use_pos_buf is set, the u32 in pos_buf[0]. Negative means "no such
// row yet" (a hot -> cold move before the ring is full) and is skipped (kv_rows reports an append's). A GPU
// position that takes the sum past i32 (positions of any layout, rings included, stay below 2^31) is reported on
// the device error flag (site KV_ERROR_SITE, which the including kernel declares) and the row is skipped: returns
// vec2(position, 1) for a row to write, vec2(0, 0) for one to skip.
fn kv_pos(r: u32) -> vec2<i32> {
    let base = params.pos + i32(r);  // the host keeps pos + n_rows within i32
    if (params.use_pos_buf == 0u) {
        return vec2<i32>(base, 1);
    }
    let g = pos_buf[0];
    let room = u32(0x7fffffff - max(base, 0));  // the largest g with base + g still an i32
    if (g > room) {
        // the row's position base + g (past 2^31 - 1 here), 4294967295 where it passes 2^32 - 1, against 2^31
        var at = g - u32(-min(base, 0));   // base < 0: g > room >= -base, no wrap
        if (base > 0) {
            at = select(g + u32(base), 0xFFFFFFFFu, g > 0xFFFFFFFFu - u32(base));
        }
        report_error(KV_ERROR_SITE, at, 0x80000000u);
        return vec2<i32>(0, 0);
    }
    return vec2<i32>(base + i32(g), 1);
}

// Cache row and source row of row r of an append or a hot -> cold move, as vec2(dst, src). dst is 0xFFFFFFFF when
// row r is skipped (its position is negative or outside the cache); src is then not computed. Reads the including
// kernel's params: pos, use_pos_buf, dst_layout, capacity, page_size, src_layout, src_ring, src_row0. An int
// position is checked on the host; a GPU position outside the cache writes nothing and is reported. A negative
// one is skipped silently only for a hot -> cold move (src_layout 1: a row not in the ring yet); an append's
// (a GPU position plus a negative pos_offset) is outside the cache, reported as 4294967295.
fn kv_rows(r: u32) -> vec2<u32> {
    return kv_rows_at(r, kv_pos(r));
}

// kv_rows from row r's position p = kv_pos(r), for a kernel that reads the position itself too (rope_kv_pair.wgsl)
fn kv_rows_at(r: u32, p: vec2<i32>) -> vec2<u32> {
    let t = p.x;
    if (p.y == 0 || t < 0) {
        if (p.y != 0 && params.src_layout == 0u) {
            report_error(KV_ERROR_SITE, 0xFFFFFFFFu, params.capacity);
        }
        return vec2<u32>(0xFFFFFFFFu, 0u);
    }
    let row = kv_row(u32(t), params.dst_layout, params.capacity, params.page_size);
    if (row == KV_NO_ROW || row == KV_BAD_PAGE) {
        if (row == KV_NO_ROW) {
            report_error(KV_ERROR_SITE, u32(t), params.capacity);
        }
        return vec2<u32>(0xFFFFFFFFu, 0u);
    }
    var src_row = params.src_row0 + r;
    if (params.src_layout == 1u) {
        src_row = u32(t) % params.src_ring;
    }
    return vec2<u32>(row, src_row);
}
