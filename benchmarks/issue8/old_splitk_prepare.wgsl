// Split-K decode, step 0 (only when kv_len is a GPU tensor): read kv_len and write the main kernel's
// indirect workgroup counts (chunks, kv heads, head blocks), so the split follows the length with no
// re-planning. One thread. Dispatch: (1, 1, 1).
//!include attention_params.wgsl
//!include old_splitk_common.wgsl
@group(0) @binding(9) var<storage, read_write> args: array<u32>;

@compute @workgroup_size(1, 1, 1)
fn main() {
    let kv_len = kv_len_now();
    let range = splitk_range(kv_len);
    args[0] = splitk_count(range.y - range.x);
    args[1] = params.num_kv_heads;
    args[2] = head_blocks();
}
