// Write n_rows rows of [kv_heads * head_dim] values into a contiguous, ring or paged cache at position pos + r.
// The source is either linear rows src_row0 + r (an append) or a ring indexed by the same position (a hot -> cold move).
{{ENABLE_F16}}

struct KVAppendParams {
    n_rows: u32,
    row_elems: u32,
//!include kv_common_fields.wgsl
    cache_rows: u32,   // dst's rows, from the host's shape (see cache_rows())
}

@group(0) @binding(0) var<uniform> params: KVAppendParams;
@group(0) @binding(1) var<storage, read> src: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(3) var<storage, read> page_table: array<u32>;
@group(0) @binding(4) var<storage, read> pos_buf: array<u32>;

//!include kv_common.wgsl
const KV_ERROR_SITE: u32 = ERR_KV_APPEND_POS;
const KV_PAGE_ERROR_SITE: u32 = ERR_KV_APPEND_PAGE;

// Not arrayLength(&dst) / row_elems: an f16 binding is padded to 4 bytes, so a cache of an odd number of rows of one
// value (kv_heads 1, head_dim 1) had a row more, and a paged append to that page id wrote the padding with no report,
// or, for a prefix view of a larger cache, the row after the view.
fn cache_rows() -> u32 {
    return params.cache_rows;
}

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * {{WORKGROUP_SIZE_X}}u;
    if (idx >= params.n_rows * params.row_elems) {
        return;
    }
    let r = idx / params.row_elems;
    let e = idx % params.row_elems;
    let rows = kv_rows(r);
    if (rows.x == 0xFFFFFFFFu) {
        return;
    }
    let row = rows.x;
    let src_row = rows.y;
    dst[row * params.row_elems + e] = src[src_row * params.row_elems + e];
}
