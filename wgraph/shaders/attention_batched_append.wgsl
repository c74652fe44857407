// Writes k_new / v_new [B, new_rows, Hkv, D] into per-sequence caches at each sequence's cache_seqlens[b]
// (contiguous [B, capacity, Hkv, D] or paged through block_table), before attention_kvcache attends. One
// thread per element of k_new (it writes k and v). A position at or past the capacity (a GPU cache_seqlens
// the host could not check) or through a page id past the pool is not written; both are reported on the device
// error flag.
// Dispatch: ctx.grid(ceil(B * new_rows * Hkv * D / WG)).
{{ENABLE_F16}}
struct AppendParams {
    total: u32,              // elements of k_new
    row_elems: u32,          // Hkv * D
    new_rows: u32,           // rows per sequence
    capacity: u32,           // positions one sequence holds
    paged: u32,
    page_size: u32,
    max_pages: u32,
    num_pages: u32,
    grid_x: u32,             // workgroups along x (the flat index spans x and y)
}
@group(0) @binding(0) var<uniform> params: AppendParams;
@group(0) @binding(1) var<storage, read> k_new: array<{{T}}>;
@group(0) @binding(2) var<storage, read> v_new: array<{{T}}>;
@group(0) @binding(3) var<storage, read> cache_seqlens: array<u32>;
@group(0) @binding(4) var<storage, read> block_table: array<u32>;
@group(0) @binding(5) var<storage, read_write> k_cache: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> v_cache: array<{{T}}>;
//!include device_errors.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let idx = (wid.y * params.grid_x + wid.x) * {{WORKGROUP_SIZE_X}}u + t;
    if (idx >= params.total) {
        return;
    }
    let e = idx % params.row_elems;
    let row = idx / params.row_elems;            // b * new_rows + r
    let b = row / params.new_rows;
    let r = row % params.new_rows;
    let have = cache_seqlens[b];
    if (have > params.capacity - params.new_rows) {   // host checks new_rows <= capacity: no wrap here
        if (idx == row * params.row_elems) {    // once per row
            report_error(ERR_KVCACHE_LEN, select(have + params.new_rows, 0xffffffffu,
                                                 have > 0xffffffffu - params.new_rows), params.capacity);
        }
        if (have >= params.capacity || r >= params.capacity - have) {
            return;                              // past the capacity: not written
        }
    }
    let pos = have + r;
    var dst = b * params.capacity + pos;
    if (params.paged != 0u) {
        var page = block_table[b * params.max_pages + pos / params.page_size];
        if (page >= params.num_pages) {
            // not clamped to the last page: that page belongs to another sequence, whose keys it would overwrite
            report_error(ERR_KVCACHE_PAGE, page, params.num_pages);
            return;
        }
        dst = page * params.page_size + pos % params.page_size;
    }
    k_cache[dst * params.row_elems + e] = k_new[idx];
    v_cache[dst * params.row_elems + e] = v_new[idx];
}
