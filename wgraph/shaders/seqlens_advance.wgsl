// cache_seqlens[b] += add for every sequence, on the GPU, so a recorded batched decode step advances its
// own lengths when replayed. Saturates at u32 max rather than wrapping. Dispatch: (ceil(count / WG), 1, 1).
struct AdvanceParams {
    count: u32,
    add: u32,
}
@group(0) @binding(0) var<uniform> params: AdvanceParams;
@group(0) @binding(1) var<storage, read_write> lens: array<u32>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < params.count) {
        lens[i] = lens[i] + min(params.add, 0xffffffffu - lens[i]);
    }
}
