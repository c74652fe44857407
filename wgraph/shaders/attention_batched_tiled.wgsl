// Batched tiled attention: any number of queries per sequence (varlen prefill, a cache with several new
// rows). Workgroup (h, b, z) takes q head h of sequence b, queries i0 .. i0 + BLOCK_M with i0 = (nblocks - 1 - z)
// * BLOCK_M (the blocks with the most keys start first, across the batch); a workgroup past its sequence's
// queries returns at once, so one dispatch of (Hq, B, ceil(max_q / BLOCK_M)) serves any ragged batch. The body is attention_prefill_tiled.wgsl's: TPQ = WG / BLOCK_M threads per query split its
// head dims; per tile of TILE_N keys, K and V go to workgroup memory (f32), the BLOCK_M x TILE_N scores are
// computed once, and each query's threads apply the online-softmax update. Workgroup memory:
// (2 * TILE_N * MAX_HEAD_DIM + BLOCK_M * TILE_N) * 4 bytes, kept near 17 KB (lavapipe: docs/lavapipe.md).
// The consts, the tile load and the softmax update are included from the single-sequence kernel's files
// (attention_tiled_consts.wgsl, attention_tiled_load.wgsl, attention_tiled_update.wgsl).
{{ENABLE_F16}}
//!include attention_batched_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
//!include {{KV_SCALAR}}
@group(0) @binding(7) var<storage, read_write> out: array<{{OUT_T}}>;
@group(0) @binding(8) var<storage, read_write> lse: array<f32>;

//!include attention_tiled_consts.wgsl
const_assert WG % BLOCK_M == 0u;

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let h = wid.x;
    let b = wid.y;
    let i0 = (nwg.z - 1u - wid.z) * BLOCK_M;
    let sq = seq_q(b);
    let sk = seq_k(b);
    enter_seq(b, sk.x);
    if (i0 >= sq.y) {
        return;                           // the whole workgroup: past this sequence's queries
    }
    let g = h / (params.num_heads / params.num_kv_heads);
    let D = params.head_dim;
    let Hq = params.num_heads;

    let qi = t / TPQ;
    let sub = t % TPQ;
    let i = i0 + qi;

    // Key ranges only move right as the query index grows: the block's union is [range(first).x, range(last).y).
    let i_last = min(i0 + BLOCK_M, sq.y) - 1u;
    let lo = visible(i0, sq.y, sk.y).x;
    let hi = max(lo, visible(i_last, sq.y, sk.y).y);

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
            if (ii < sq.y && kk < n_keys) {
                let r = visible(ii, sq.y, sk.y);
                if (j >= r.x && j < r.y) {
                    let qb = ((sq.x + ii) * Hq + h) * D;
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

    if (i < sq.y) {
        var inv_l: f32 = 0.0;
        if (l > 0.0) {
            inv_l = 1.0 / l;              // a row with every key masked stays 0, never NaN
        }
        let row = sq.x + i;
        for (var n: u32 = 0u; n < DIMS_PER_THREAD; n++) {
            let d = sub + n * TPQ;
            if (d < D) {
                out[(row * Hq + h) * D + d] = {{OUT_T}}(select(acc[n] * inv_l, poison, poisoned));
            }
        }
        if (params.write_lse != 0u && sub == 0u) {
            lse[h * params.q_rows + row] = select(lse_of(m, l), poison, poisoned);
        }
    }
}
