// Flash-attention prefill, register-tiled. A workgroup takes BLOCK_M queries of one q head; each thread
// owns ROWS_PER_THREAD queries (ROW_STEP apart) and, with the TPQ - 1 other lanes of its subgroup that share
// those rows, splits their head dims: lane `part` owns vec4s part, part + TPQ, ... (interleaved, so the
// lanes of a row read neighbouring vec4s of a K/V row: no bank conflicts). A thread keeps its q dims and
// output accumulators in registers for the whole kernel; K/V tiles of TILE_N keys sit in workgroup memory.
// Per tile: load K and V (16-byte loads, zero past head_dim and kv end), barrier; partial q.k per thread,
// summed over the TPQ lanes by a subgroupShuffleXor butterfly (TPQ <= 4: WebGPU guarantees subgroups of at
// least 4 invocations); one online-softmax update per tile; P.V into the registers; barrier. Every K vec4
// read from workgroup memory feeds 4 * R FMAs. Tiles beyond the block's key range (causal, window) are
// never visited, and the blocks with the most keys start first (block index reversed).
// q.k is always f32: summing it in f16 was tried and broke FlashAttention's error rule by 8-85x wherever
// scores are large (peaky softmax), so it would be a silent wrong answer on real activations. MT is the
// type of the V tile and of a tile's P.V sum: f32, or f16 for the packed-f16 variants (PACKED_F16 with
// MT f16): p is in [0, 1], so P.V in vec4<f16> FMAs (two lanes an instruction) over one tile, folded into
// the f32 accumulators after each tile, stays within the rule; softmax state is f32.
// Loops over register arrays are unrolled with //!repeat. Dispatch: (ceil(seq_len / BLOCK_M), num_heads, 1).
{{ENABLE_F16}}
//!include attention_params.wgsl
@group(0) @binding(1) var<storage, read> q: array<vec4<{{Q_T}}>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<{{KV_T}}>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<{{KV_T}}>>;
@group(0) @binding(4) var<storage, read> kv_len_buf: array<u32>;
@group(0) @binding(5) var<storage, read> page_table: array<u32>;
@group(0) @binding(6) var<storage, read_write> out: array<vec4<{{OUT_T}}>>;
@group(0) @binding(10) var<storage, read_write> lse: array<f32>;   // [Hq, S]; a 4-byte fallback unless write_lse
//!include attention_kv_layout.wgsl

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
    let i0 = (nwg.x - 1u - wid.x) * BLOCK_M;
    let g = kv_head_of(h);
    let D4 = params.head_dim / 4u;
    let S = params.seq_len;
    let kv_len = kv_len_now();

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
        ob[$r] = (min(i, S - 1u) * params.num_heads + h) * D4;
        var rr = vec2<u32>(0u, 0u);
        if (ok[$r]) {
            rr = key_range(query_pos(i, kv_len), kv_len);
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
    let lo = key_range(query_pos(i0, kv_len), kv_len).x;
    let hi = max(lo, key_range(query_pos(i_last, kv_len), kv_len).y);

    for (var base: u32 = lo; base < hi; base += TILE_N) {
        let n_keys = min(TILE_N, hi - base);
        for (var idx: u32 = t; idx < TILE4; idx += WG) {
            let kk = idx / ROW4;
            let d4 = idx % ROW4;
            var kx = vec4<f32>(0.0);
            var vx = vec4<MT>(0.0);
            if (kk < n_keys && d4 < D4) {
                let at = (kv_row(base + kk) * params.num_kv_heads + g) * D4 + d4;
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
            lse[h * S + i0 + row0 + ${r}u * ROW_STEP] = select(lse_of(m[$r], l[$r]), poison[$r], poisoned[$r]);
        }
    }
//!end
}
