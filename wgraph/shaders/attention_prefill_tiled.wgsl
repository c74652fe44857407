// Tiled prefill attention (flash-style). A workgroup takes BLOCK_M queries of one q head; THREADS_PER_Q =
// WORKGROUP_SIZE / BLOCK_M threads share a query and split its head dims. Each step loads a tile of TILE_N
// keys (K and V, converted to f32) into workgroup memory, computes the BLOCK_M x TILE_N scores once
// (spread over all threads), and each query's threads apply the online-softmax update to their dims.
// Three barriers per tile, none per key; any kv_len (the loop walks the union of the block's key ranges).
// Workgroup memory: (2 * TILE_N * MAX_HEAD_DIM + BLOCK_M * TILE_N) * 4 bytes; the registry keeps both
// variants near 20 KB, well below the 32 KB at which lavapipe misbehaved (docs/lavapipe.md).
// Dispatch: (num_heads, ceil(seq_len / BLOCK_M), 1), the blocks with the most keys first (block index reversed).
{{ENABLE_F16}}
//!include attention_params.wgsl
//!include attention_kv.wgsl
@group(0) @binding(6) var<storage, read_write> out: array<{{OUT_T}}>;
@group(0) @binding(10) var<storage, read_write> lse: array<f32>;   // [Hq, S]; a 4-byte fallback unless write_lse

//!include attention_tiled_consts.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let h = wid.x;
    let i0 = (nwg.y - 1u - wid.y) * BLOCK_M;
    let g = kv_head_of(h);
    let D = params.head_dim;
    let S = params.seq_len;
    let kv_len = kv_len_now();

    let qi = t / TPQ;
    let sub = t % TPQ;
    let i = i0 + qi;

    // Key ranges only move right as the query position grows, so the block's union is
    // [range(first).x, range(last).y).
    let i_last = min(i0 + BLOCK_M, S) - 1u;
    let lo = key_range(query_pos(i0, kv_len), kv_len).x;
    let hi = max(lo, key_range(query_pos(i_last, kv_len), kv_len).y);

    var m: f32 = MASKED;
    var l: f32 = 0.0;
    var acc: array<f32, DIMS_PER_THREAD>;
    var poisoned = false;                 // a visible score was NaN: the row's output is NaN
    var poison: f32 = 0.0;

    for (var base: u32 = lo; base < hi; base += TILE_N) {
        let n_keys = min(TILE_N, hi - base);
//!include attention_tiled_load.wgsl

        for (var p: u32 = t; p < S_TILE; p += WG) {
            let qq = p / TILE_N;
            let kk = p % TILE_N;
            let ii = i0 + qq;
            let j = base + kk;
            var s: f32 = MASKED;
            if (ii < S && kk < n_keys) {
                let r = key_range(query_pos(ii, kv_len), kv_len);
                if (j >= r.x && j < r.y) {
                    let qb = q_index(ii, h, 0u);
                    var dot_qk: f32 = 0.0;
                    for (var d: u32 = 0u; d < D; d++) {
                        dot_qk += f32(q[qb + d]) * k_tile[kk * D + d];
                    }
                    s = transform_score(dot_qk);
                }
            }
            s_tile[p] = s;
        }
        workgroupBarrier();

//!include attention_tiled_update.wgsl
        workgroupBarrier();               // tiles are rewritten by the next step
    }

    if (i < S) {
        var inv_l: f32 = 0.0;
        if (l > 0.0) {
            inv_l = 1.0 / l;              // a row with every key masked stays 0, never NaN
        }
        for (var n: u32 = 0u; n < DIMS_PER_THREAD; n++) {
            let d = sub + n * TPQ;
            if (d < D) {
                out[q_index(i, h, d)] = {{OUT_T}}(select(acc[n] * inv_l, poison, poisoned));
            }
        }
        if (params.write_lse != 0u && sub == 0u) {
            lse[h * S + i] = select(lse_of(m, l), poison, poisoned);
        }
    }
}
