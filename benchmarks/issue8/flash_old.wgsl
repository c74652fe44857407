// Flash-attention prefill, register-tiled. A workgroup takes BLOCK_M queries of one q head; each thread
// owns ROWS_PER_THREAD queries and, with THREADS_PER_QUERY - 1 others, splits their head dims in
// contiguous runs of vec4s. A thread keeps its q dims and output accumulators in registers for the whole
// kernel, so the inner loops are vec4 FMAs against K/V tiles in workgroup memory: one load of a K vec4
// feeds 4 * ROWS_PER_THREAD FMAs, one of a V vec4 four. Loops over register arrays are unrolled with //!repeat.
// Per tile of TILE_N keys: load K and V (f32, zero-padded past head_dim and kv end), barrier, partial q.k
// per thread, (TPQ > 1: sum the partials through workgroup memory, barrier), one online-softmax update per
// tile (not per key), P.V into the registers, barrier. Tiles beyond the block's key range (causal, window)
// are never visited: the loop walks the union of the block's key intervals.
// Works without subgroups. Dispatch: (ceil(seq_len / BLOCK_M), num_heads, 1).
{{ENABLE_F16}}
//!include attention_params.wgsl
//!include attention_kv.wgsl
@group(0) @binding(6) var<storage, read_write> out: array<{{OUT_T}}>;

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
const_assert {{PARTIAL_LEN}}u == select(1u, BLOCK_M * TPQ * TILE_N, TPQ > 1u);

var<workgroup> k_tile: array<vec4<f32>, TILE4>;
var<workgroup> v_tile: array<vec4<f32>, TILE4>;
var<workgroup> partial: array<f32, {{PARTIAL_LEN}}>;   // BLOCK_M * TPQ * TILE_N when TPQ > 1, else 1

fn load_kv4(buf_is_k: bool, row: u32, g: u32, d: u32, D: u32) -> vec4<f32> {
    var x = vec4<f32>(0.0);
    let at = kv_index(row, g, d);
    for (var c: u32 = 0u; c < 4u; c++) {
        if (d + c < D) {
            if (buf_is_k) {
                x[c] = f32(k[at + c]);
            } else {
                x[c] = f32(v[at + c]);
            }
        }
    }
    return x;
}

fn load_q4(row_ok: bool, qb: u32, d: u32, D: u32) -> vec4<f32> {
    var x = vec4<f32>(0.0);
    if (row_ok) {
        for (var c: u32 = 0u; c < 4u; c++) {
            if (d + c < D) {
                x[c] = f32(q[qb + d + c]);
            }
        }
    }
    return x;
}

fn store_out4(ob: u32, d: u32, D: u32, x: vec4<f32>) {
    for (var c: u32 = 0u; c < 4u; c++) {
        if (d + c < D) {
            out[ob + d + c] = {{OUT_T}}(x[c]);
        }
    }
}

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let h = wid.y;
    let i0 = wid.x * BLOCK_M;
    let g = kv_head_of(h);
    let D = params.head_dim;
    let S = params.seq_len;
    let kv_len = kv_len_now();

    let row0 = t / TPQ;                  // the thread's rows: row0 + r * ROW_STEP, r < R
    let part = t % TPQ;
    let d0 = part * DPT4 * 4u;
    let own = part * DPT4;

    // Every index into these arrays is a constant after //!repeat: they stay in registers.
    // Row r's values sit at [r * DPT4 + n] (q, o) and [r * TILE_N + kk] (scores).
    var qr: array<vec4<f32>, {{ROWS_PER_THREAD}}u * DPT4>;
    var o: array<vec4<f32>, {{ROWS_PER_THREAD}}u * DPT4>;
    var s: array<f32, {{ROWS_PER_THREAD}}u * TILE_N>;
    var qb: array<u32, {{ROWS_PER_THREAD}}>;
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
        qb[$r] = q_index(min(i, S - 1u), h, 0u);
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
        qr[${r}u * DPT4 + ${n}u] = load_q4(ok[$r], qb[$r], d0 + ${n}u * 4u, D);
        o[${r}u * DPT4 + ${n}u] = vec4<f32>(0.0);
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
            let d = (idx % ROW4) * 4u;
            var kx = vec4<f32>(0.0);
            var vx = vec4<f32>(0.0);
            if (kk < n_keys && d < D) {
                let row = kv_row(base + kk);
                kx = load_kv4(true, row, g, d, D);
                vx = load_kv4(false, row, g, d, D);
            }
            k_tile[idx] = kx;
            v_tile[idx] = vx;
        }
        workgroupBarrier();

        // Partial q.k over this thread's dims: each K vec4 read from workgroup memory feeds R rows.
//!repeat kk TILE_N
        {
//!repeat r R
            var acc$r: f32 = 0.0;
//!end
//!repeat n DPT4
            {
                let kv4 = k_tile[${kk}u * ROW4 + own + ${n}u];
//!repeat r R
                acc$r += dot(qr[${r}u * DPT4 + ${n}u], kv4);
//!end
            }
//!end
//!repeat r R
            s[${r}u * TILE_N + ${kk}u] = acc$r;
//!end
        }
//!end
        if (TPQ > 1u) {
//!repeat r R
//!repeat kk TILE_N
            partial[((row0 + ${r}u * ROW_STEP) * TPQ + part) * TILE_N + ${kk}u] = s[${r}u * TILE_N + ${kk}u];
//!end
//!end
            workgroupBarrier();
//!repeat r R
//!repeat kk TILE_N
            {
                var acc: f32 = 0.0;
                for (var p: u32 = 0u; p < TPQ; p++) {
                    acc += partial[((row0 + ${r}u * ROW_STEP) * TPQ + p) * TILE_N + ${kk}u];
                }
                s[${r}u * TILE_N + ${kk}u] = acc;
            }
//!end
//!end
        }

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
//!repeat kk TILE_N
//!repeat r R
        if (s[${r}u * TILE_N + ${kk}u] != 0.0) {
            let p = s[${r}u * TILE_N + ${kk}u];
//!repeat n DPT4
            o[${r}u * DPT4 + ${n}u] += p * v_tile[${kk}u * ROW4 + own + ${n}u];
//!end
        }
//!end
//!end
        workgroupBarrier();               // tiles and partials are rewritten by the next step
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
        store_out4(qb[$r], d0 + ${n}u * 4u, D, o[${r}u * DPT4 + ${n}u] * inv_l);
//!end
    }
//!end
}
