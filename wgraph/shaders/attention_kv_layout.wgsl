// Shared by every attention kernel that reads k/v rows: the kv length and the kv layouts. Needs
// attention_params.wgsl first and the bindings kv_len_buf and page_table (attention_kv.wgsl declares
// them with the scalar q/k/v; attention_decode_splitk_kv.wgsl with vector k/v).
//!include device_errors.wgsl

// A GPU kv_len above the keys the storage addresses is clamped (no read out of bounds) and reported. A ring's
// kv_len past its rows whose window lets a query see keys the ring dropped is reported too (those keys still count
// as masked): the host refuses that int kv_len (attention.validate), so a GPU one must not give a silent answer.
fn kv_len_now() -> u32 {
    if (params.kv_len_from_buffer != 0u) {
        var n = kv_len_buf[0];
        if (n > params.kv_len_cap) {
            report_error(ERR_ATTENTION_KV_LEN, n, params.kv_len_cap);
            n = params.kv_len_cap;
        }
        if (KV_RING && n > params.kv_rows) {
            let most = ring_kv_len_max(n);
            if (n > most) {
                report_error(ERR_ATTENTION_RING, n, most);
            }
        }
        return n;
    }
    return params.kv_len;
}

// The largest kv_len for which a ring still holds every key a query may see (attention.validate's rule for an int
// kv_len): the ring holds keys kv_len - kv_rows.. and the first query's window reaches furthest back (later
// queries' windows start later, keys after a query are newer). No window: the ring's rows.
fn ring_kv_len_max(kv_len: u32) -> u32 {
    let rows = params.kv_rows;
    let w = params.sliding_window;
    if (w == 0u) {
        return rows;
    }
    if (params.start_pos_from_end != 0u) {
        // query 0 sits at kv_len - S and sees from kv_len - S - w + 1: stored for every kv_len iff S + w - 1 <= rows
        if (params.seq_len <= rows && w - 1u <= rows - params.seq_len) {
            return 0xFFFFFFFFu;
        }
        return rows;
    }
    let rel = query_pos(0u, kv_len);
    if (rel.x != 0u || rel.y < w - 1u) {
        return rows;   // the window reaches before key 0: only a kv_len within the rows stores it all
    }
    // query 0 sees from key rel - (w - 1); stored while kv_len - rows <= it
    let reach = rel.y - (w - 1u);
    return select(0xFFFFFFFFu, rows + reach, reach <= 0xFFFFFFFFu - rows);
}

// Row of the k/v buffers that holds key j (absolute position kv_start + j). A page id past the pages the rows
// hold (a GPU table the host cannot check) is clamped to the last page and reported.
fn kv_row(j: u32) -> u32 {
    if (KV_RING) {
        // (kv_start + j) % kv_rows without the u32 wrap of kv_start + j (key positions may pass 2^32).
        return (params.kv_start % params.kv_rows + j % params.kv_rows) % params.kv_rows;
    }
    if (KV_PAGED) {
        var page = page_table[j / params.page_size];
        let pages = params.kv_rows / params.page_size;
        if (page >= pages) {
            report_error(ERR_ATTENTION_PAGE, page, pages);
            page = pages - 1u;
        }
        return page * params.page_size + j % params.page_size;
    }
    return j;
}
