// Batched flash attention: attention_prefill_flash.wgsl's register-tiled kernel over a ragged batch
// (attention_varlen, attention_kvcache with several queries per sequence). Workgroup (x, h, b) takes query block
// x of sequence b, q head h, counted from the sequence's end (the blocks with the most keys start first); a block
// past the sequence's queries returns at once, so one dispatch of (ceil(max_q / BLOCK_M), Hq, B) serves any
// batch. Positions, masks and rows come from attention_batched_common.wgsl; everything else (registers, tiles,
// the subgroup butterfly, NaN handling, packed f16 P.V) is the single-sequence kernel's, described there.
{{ENABLE_F16}}
//!include attention_batched_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<vec4<{{Q_T}}>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<{{KV_T}}>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<{{KV_T}}>>;
@group(0) @binding(7) var<storage, read_write> out: array<vec4<{{OUT_T}}>>;
@group(0) @binding(8) var<storage, read_write> lse: array<f32>;

alias MT = {{MATH_T}};
const PACKED_F16: bool = {{PACKED_F16}};   // true with MT f16, false with MT f32
const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const BLOCK_M: u32 = {{BLOCK_M}}u;
const TPQ: u32 = {{THREADS_PER_QUERY}}u;
const R: u32 = {{ROWS_PER_THREAD}}u;
const ROW_STEP: u32 = {{BLOCK_M}}u / {{ROWS_PER_THREAD}}u;   // a thread's rows are ROW_STEP apart
const TILE_N: u32 = {{TILE_N}}u;
const ROW4: u32 = {{MAX_HEAD_DIM}}u / 4u;          // vec4s in one padded K/V row
const DPT4: u32 = {{MAX_HEAD_DIM}}u / 4u / {{THREADS_PER_QUERY}}u;  // vec4s of head dims per thread
const TILE4: u32 = {{TILE_N}}u * ROW4;
// The registry's workgroup size and tile shape must agree: one thread per (row group, dim slice).
const_assert WG == ROW_STEP * TPQ;
const_assert TPQ <= 4u;

var<workgroup> k_tile: array<vec4<f32>, TILE4>;
var<workgroup> v_tile: array<vec4<MT>, TILE4>;

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) lane: u32) {
    let h = wid.y;
    let b = wid.z;
    let sq = seq_q(b);
    let sk = seq_k(b);
    let S = sq.y;
    let i0 = (nwg.x - 1u - wid.x) * BLOCK_M;
    if (i0 >= S) {
        return;                          // the whole workgroup: past this sequence's queries
    }
    let g = h / (params.num_heads / params.num_kv_heads);
    let D4 = params.head_dim / 4u;

    // The TPQ lanes of a row group are neighbours in one subgroup, whatever order the device numbers them.
    let vt = sg * sg_size + lane;
    let row0 = vt / TPQ;                 // the thread's rows: row0 + r * ROW_STEP, r < R
    let part = vt % TPQ;

    // Every index into these arrays is a constant after //!repeat: they stay in registers.
    // Row r's values sit at [r * DPT4 + n] (q, o) and [r * TILE_N + kk] (scores).
    var qr: array<vec4<f32>, {{ROWS_PER_THREAD}}u * DPT4>;
    var o: array<vec4<f32>, {{ROWS_PER_THREAD}}u * DPT4>;
    var s: array<f32, {{ROWS_PER_THREAD}}u * TILE_N>;
    var ob: array<u32, {{ROWS_PER_THREAD}}>;
    var ok: array<bool, {{ROWS_PER_THREAD}}>;
    var r_lo: array<u32, {{ROWS_PER_THREAD}}>;
    var r_hi: array<u32, {{ROWS_PER_THREAD}}>;
    var m: array<f32, {{ROWS_PER_THREAD}}>;
    var l: array<f32, {{ROWS_PER_THREAD}}>;
    var poisoned: array<bool, {{ROWS_PER_THREAD}}>;  // a visible score was NaN: the row's output is NaN
    var poison: array<f32, {{ROWS_PER_THREAD}}>;     // that NaN (WGSL has no NaN constant)
//!repeat r R
    {
        let i = i0 + row0 + ${r}u * ROW_STEP;
        ok[$r] = i < S;
        ob[$r] = ((sq.x + min(i, S - 1u)) * params.num_heads + h) * D4;
        var rr = vec2<u32>(0u, 0u);
        if (ok[$r]) {
            rr = visible(i, S, sk.y);
        }
        r_lo[$r] = rr.x;
        r_hi[$r] = rr.y;
        m[$r] = MASKED;
        l[$r] = 0.0;
        poisoned[$r] = false;
        poison[$r] = 0.0;
//!repeat n DPT4
        {
            let d4 = part + ${n}u * TPQ;
            var x = vec4<f32>(0.0);
            if (ok[$r] && d4 < D4) {
                x = vec4<f32>(q[ob[$r] + d4]);
            }
            qr[${r}u * DPT4 + ${n}u] = x;
            o[${r}u * DPT4 + ${n}u] = vec4<f32>(0.0);
        }
//!end
    }
//!end

    let i_last = min(i0 + BLOCK_M, S) - 1u;
    let lo = visible(i0, S, sk.y).x;
    let hi = max(lo, visible(i_last, S, sk.y).y);

    for (var base: u32 = lo; base < hi; base += TILE_N) {
        let n_keys = min(TILE_N, hi - base);
        for (var idx: u32 = t; idx < TILE4; idx += WG) {
            let kk = idx / ROW4;
            let d4 = idx % ROW4;
            var kx = vec4<f32>(0.0);
            var vx = vec4<MT>(0.0);
            if (kk < n_keys && d4 < D4) {
                let at = (kv_row(b, sk.x, base + kk) * params.num_kv_heads + g) * D4 + d4;
                kx = vec4<f32>(k[at]);
                vx = vec4<MT>(v[at]);
            }
            k_tile[idx] = kx;
            v_tile[idx] = vx;
        }
        workgroupBarrier();

        // Partial q.k over this thread's dims, then the butterfly over the row's TPQ lanes.
//!repeat kk TILE_N
        {
//!repeat r R
            var acc$r = vec4<f32>(0.0);
//!end
//!repeat n DPT4
            {
                let kv4 = k_tile[${kk}u * ROW4 + part + ${n}u * TPQ];
//!repeat r R
                acc$r = fma(qr[${r}u * DPT4 + ${n}u], kv4, acc$r);
//!end
            }
//!end
//!repeat r R
            {
                var x = (acc$r.x + acc$r.y) + (acc$r.z + acc$r.w);
                for (var mask: u32 = 1u; mask < TPQ; mask *= 2u) {
                    x += subgroupShuffleXor(x, mask);
                }
                s[${r}u * TILE_N + ${kk}u] = x;
            }
//!end
        }
//!end

        var corr: array<f32, {{ROWS_PER_THREAD}}>;
        var m_new: array<f32, {{ROWS_PER_THREAD}}>;
//!repeat r R
        {
            var tile_max: f32 = MASKED;
//!repeat kk TILE_N
            if (${kk}u < n_keys && base + ${kk}u >= r_lo[$r] && base + ${kk}u < r_hi[$r]) {
                s[${r}u * TILE_N + ${kk}u] = transform_score(s[${r}u * TILE_N + ${kk}u]);
                if (is_nan_f32(s[${r}u * TILE_N + ${kk}u])) {   // tile_max > MASKED_TEST would drop it
                    poisoned[$r] = true;
                    poison[$r] = s[${r}u * TILE_N + ${kk}u];
                }
            } else {
                s[${r}u * TILE_N + ${kk}u] = MASKED;
            }
            tile_max = max(tile_max, s[${r}u * TILE_N + ${kk}u]);
//!end
            // A row that sees no key of this tile keeps its state: corr 1, every p exp(-3e38 - m) == 0.
            m_new[$r] = max(m[$r], tile_max);
            corr[$r] = exp(m[$r] - m_new[$r]);
            var psum: f32 = 0.0;
//!repeat kk TILE_N
            {
                let p = exp(s[${r}u * TILE_N + ${kk}u] - m_new[$r]);
                s[${r}u * TILE_N + ${kk}u] = p;
                psum += p;
            }
//!end
            if (tile_max > MASKED_TEST) {
                l[$r] = l[$r] * corr[$r] + psum;
                m[$r] = m_new[$r];
            } else {
                corr[$r] = 1.0;
//!repeat kk TILE_N
                s[${r}u * TILE_N + ${kk}u] = 0.0;
//!end
            }
//!repeat n DPT4
            o[${r}u * DPT4 + ${n}u] = o[${r}u * DPT4 + ${n}u] * corr[$r];
//!end
        }
//!end

        // P.V. A key a row does not see is skipped, not multiplied by 0: a NaN in that key's V must not
        // reach this row (docs/errors.md). The branch is uniform wherever a tile is fully visible.
        if (PACKED_F16) {
//!repeat r R
            {
//!repeat n DPT4
                var pv$n = vec4<MT>(0.0);
//!end
//!repeat kk TILE_N
                if (s[${r}u * TILE_N + ${kk}u] != 0.0) {
                    let p = vec4<MT>(MT(s[${r}u * TILE_N + ${kk}u]));
//!repeat n DPT4
                    pv$n = fma(p, v_tile[${kk}u * ROW4 + part + ${n}u * TPQ], pv$n);
//!end
                }
//!end
//!repeat n DPT4
                o[${r}u * DPT4 + ${n}u] += vec4<f32>(pv$n);
//!end
            }
//!end
        } else {
//!repeat kk TILE_N
//!repeat r R
            if (s[${r}u * TILE_N + ${kk}u] != 0.0) {
                let p = s[${r}u * TILE_N + ${kk}u];
//!repeat n DPT4
                o[${r}u * DPT4 + ${n}u] += p * vec4<f32>(v_tile[${kk}u * ROW4 + part + ${n}u * TPQ]);
//!end
            }
//!end
//!end
        }
        workgroupBarrier();               // the tiles are rewritten by the next step
    }

//!repeat r R
    if (ok[$r]) {
        var inv_l: f32 = 0.0;
        if (l[$r] > 0.0) {
            inv_l = 1.0 / l[$r];          // a row with every key masked stays 0, never NaN
        }
        if (poisoned[$r]) {
            inv_l = poison[$r];           // NaN in, NaN out (docs/errors.md)
        }
//!repeat n DPT4
        {
            let d4 = part + ${n}u * TPQ;
            if (d4 < D4) {
                out[ob[$r] + d4] = vec4<{{OUT_T}}>(o[${r}u * DPT4 + ${n}u] * inv_l);
            }
        }
//!end
        if (params.write_lse != 0u && part == 0u) {
            lse[h * params.q_rows + sq.x + i0 + row0 + ${r}u * ROW_STEP] = select(row_lse(m[$r], l[$r]), poison[$r], poisoned[$r]);
        }
    }
//!end
}
