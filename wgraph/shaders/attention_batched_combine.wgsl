// Batched split-K decode, step 2: workgroup (0, h, b) merges the chunks' partial softmaxes (m, l, acc) of
// sequence b, q head h into out (and lse). The chunk count comes from the sequence's length as in step 1.
// No chunk (every key masked, or an empty sequence) -> zeros and lse -inf. Threads split the chunks
// (tree reductions for m and l) and the head dims (vec4s). Dispatch: (1, num_heads, B).
{{ENABLE_F16}}
//!include attention_batched_common.wgsl
@group(0) @binding(7) var<storage, read_write> out: array<vec4<{{OUT_T}}>>;
@group(0) @binding(8) var<storage, read_write> lse: array<f32>;
@group(0) @binding(9) var<storage, read> part_ml: array<f32>;
@group(0) @binding(10) var<storage, read> part_acc: array<vec4<f32>>;

const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D4: u32 = {{MAX_HEAD_DIM}}u / 4u;
const CHUNK_STEP: u32 = {{CHUNK_STEP}}u;
const_assert MAX_D4 <= WG;
var<workgroup> red: array<f32, WG>;
var<workgroup> sums: array<vec4<f32>, WG>;

//!include attention_batched_split.wgsl

fn reduce(t: u32, x: f32, is_max: bool) -> f32 {
    workgroupBarrier();
    red[t] = x;
    for (var half: u32 = WG / 2u; half > 0u; half /= 2u) {
        workgroupBarrier();
        if (t < half) {
            red[t] = select(red[t] + red[t + half], max(red[t], red[t + half]), is_max);
        }
    }
    workgroupBarrier();
    return red[0];
}

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let h = wid.y;
    let b = wid.z;
    let D4 = params.head_dim / 4u;
    let sq = seq_q(b);
    let sk = seq_k(b);
    if (sq.y == 0u) {
        return;
    }
    let range = visible(sq.y - 1u, sq.y, sk.y);
    let n = split_count(range.y - range.x);
    let first = (b * params.num_heads + h) * params.num_chunks;
    var mx: f32 = MASKED;
    for (var c: u32 = t; c < n; c += WG) {
        mx = max(mx, part_ml[(first + c) * 2u]);
    }
    let m = reduce(t, mx, true);
    var ls: f32 = 0.0;
    for (var c: u32 = t; c < n; c += WG) {
        ls += exp(part_ml[(first + c) * 2u] - m) * part_ml[(first + c) * 2u + 1u];
    }
    let l = reduce(t, ls, false);
    var inv_l: f32 = 0.0;
    if (l > 0.0) {
        inv_l = 1.0 / l;
    }
    if (is_nan_f32(l)) {
        inv_l = l;                                // NaN in, NaN out (docs/errors.md)
    }
    let groups = WG / D4;
    let d4 = t % D4;
    let grp = t / D4;
    var acc = vec4<f32>(0.0);
    if (grp < groups) {
        for (var c: u32 = grp; c < n; c += groups) {
            acc += exp(part_ml[(first + c) * 2u] - m) * part_acc[(first + c) * D4 + d4];
        }
    }
    sums[t] = acc;
    workgroupBarrier();
    let row = sq.x + sq.y - 1u;
    if (t < D4) {
        var o = vec4<f32>(0.0);
        for (var gg: u32 = 0u; gg < groups; gg++) {
            o += sums[gg * D4 + t];
        }
        out[(row * params.num_heads + h) * D4 + t] = vec4<{{OUT_T}}>(o * inv_l);
    }
    if (params.write_lse != 0u && t == 0u) {
        lse[h * params.q_rows + row] = row_lse(m, l);
    }
}
