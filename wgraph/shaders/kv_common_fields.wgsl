// The params fields kv_common.wgsl's kv_rows reads, in the uniform struct of each kernel that includes it
// directly: kv_append.wgsl, kv_quantize.wgsl.
    capacity: u32,
    dst_layout: u32,
    page_size: u32,
    pos: i32,
    use_pos_buf: u32,
    src_layout: u32,
    src_ring: u32,
    src_row0: u32,