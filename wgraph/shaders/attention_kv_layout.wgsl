// Shared by every attention kernel that reads k/v rows: the kv length and the kv layouts. Needs
// attention_params.wgsl first and the bindings kv_len_buf and page_table (attention_kv.wgsl declares
// them with the scalar q/k/v; attention_decode_splitk_kv.wgsl with vector k/v).
//!include device_errors.wgsl

// A GPU kv_len above the keys the storage addresses is clamped (no read out of bounds) and reported.
fn kv_len_now() -> u32 {
    if (params.kv_len_from_buffer != 0u) {
        let n = kv_len_buf[0];
        if (n > params.kv_len_cap) {
            report_error(ERR_ATTENTION_KV_LEN, n, params.kv_len_cap);
            return params.kv_len_cap;
        }
        return n;
    }
    return params.kv_len;
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
