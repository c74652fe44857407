// Flash-attention prefill shaped as two register-tiled GEMMs (FlashAttention 2 on CUDA cores). A workgroup takes
// BLOCK_M queries of one q head and walks the block's keys in tiles of BLOCK_N. Threads form a grid of RT row
// threads x CT column threads (t = ty * CT + tx); thread (ty, tx) owns rows ty + i * RT (i < TM).
// Per tile:
//   1. S = Q K^T as a GEMM over the head dims in chunks of DC4 vec4s: the chunk's Q rows and K rows are staged in
//      workgroup memory and thread (ty, tx) sums the TM x TN scores of its rows and keys tx + j * CT, so every
//      vec4 read feeds TN (q) or TM (k) vec4 FMAs instead of the flash kernel's 1. The raw dots go to `ps`.
//   2. Online softmax: LPR adjacent lanes own one row (its keys interleaved), mask and transform its scores,
//      take the tile max and sum through a subgroupShuffleXor butterfly (LPR <= 4: WebGPU's smallest subgroup),
//      write p back to `ps` and the row's correction to `corr_s`. The row's m and l live in those lanes.
//   3. O = O * corr + P V as a second GEMM over the tile's keys in chunks of VC: V rows staged in workgroup
//      memory, thread (ty, tx) owns the TM x DT4 vec4 block of rows ty + i * RT, dims tx + n * CT.
// All math is f32 (q.k in f16 broke FlashAttention's error rule: attention_prefill_flash.wgsl's header); f16
// inputs are widened once, when a tile is staged. Masks are intervals (key_range); a tile that some row of the
// block sees only in part skips, per row, the keys the row does not see, so a NaN in such a key's V reaches no
// row that does not see it (docs/errors.md). Dispatch: (ceil(seq_len / BLOCK_M), num_heads, 1), the blocks with
// the most keys first (block index reversed). Loops over register arrays are unrolled with //!repeat.
{{ENABLE_F16}}
//!include attention_params.wgsl
@group(0) @binding(1) var<storage, read> q: array<vec4<{{Q_T}}>>;
//!include {{KV_VEC4}}
@group(0) @binding(4) var<storage, read> kv_len_buf: array<u32>;
@group(0) @binding(5) var<storage, read> page_table: array<u32>;
@group(0) @binding(6) var<storage, read_write> out: array<vec4<{{OUT_T}}>>;
@group(0) @binding(10) var<storage, read_write> lse: array<f32>;   // [Hq, S]; a 4-byte fallback unless write_lse
//!include attention_kv_layout.wgsl

const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const BLOCK_M: u32 = {{BLOCK_M}}u;
const BLOCK_N: u32 = {{BLOCK_N}}u;
const TM: u32 = {{ROWS_PER_THREAD}}u;       // rows of a thread, both GEMMs
const TN: u32 = {{KEYS_PER_THREAD}}u;       // keys of a thread in S = Q K^T
const DC4: u32 = {{D_CHUNK}}u;              // vec4s of head dims staged per step of S = Q K^T
const VC: u32 = {{V_CHUNK}}u;               // keys of V staged per step of P V
const ROW4: u32 = {{MAX_HEAD_DIM}}u / 4u;   // vec4s in one padded Q/K/V row
const RT: u32 = BLOCK_M / TM;                    // row threads
const CT: u32 = WG / RT;                    // column threads
const TM4: u32 = TM / 4u;                   // vec4s of p a thread reads per key
const DT4: u32 = ROW4 / CT;                 // vec4s of head dims a thread owns in P V
const LPR: u32 = WG / BLOCK_M;                   // lanes of a row in the softmax
const KPL: u32 = BLOCK_N / LPR;                  // keys of a lane in the softmax
const QS: u32 = DC4 + 1u;                   // padded stride of a staged Q/K row: lanes reading 8 K rows hit 8 bank groups
const_assert BLOCK_M % TM == 0u && TM % 4u == 0u;
const_assert WG % RT == 0u && BLOCK_N == CT * TN && ROW4 % CT == 0u;
const_assert WG % BLOCK_M == 0u && LPR <= 4u && BLOCK_N % LPR == 0u;
const_assert ROW4 % DC4 == 0u && BLOCK_N % VC == 0u;

var<workgroup> qs: array<vec4<f32>, BLOCK_M * QS>;
var<workgroup> ks: array<vec4<f32>, BLOCK_N * QS>;
var<workgroup> vs: array<vec4<f32>, VC * ROW4>;
// Scores, then p, of the tile: key kk, row ty + i * RT at vec4 (kk * RT + ty) * TM4 + i / 4, component i % 4,
// so step 3 reads a thread's TM rows of one key as TM4 vec4s.
var<workgroup> ps: array<vec4<f32>, BLOCK_N * RT * TM4>;
var<workgroup> corr_s: array<f32, BLOCK_M>;      // per row: the tile's correction; after the last tile 1 / l

// ps's vec4 and component of (key kk, block row r)
fn p_slot(kk: u32, r: u32) -> vec2<u32> {
    let i = r / RT;
    return vec2<u32>((kk * RT + r % RT) * TM4 + i / 4u, i % 4u);
}

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
    let ty = t / CT;
    let tx = t % CT;

    // The softmax lanes of a row are neighbours in one subgroup, whatever order the device numbers them.
    let vt = sg * sg_size + lane;
    let row = vt / LPR;
    let part = vt % LPR;
    let row_ok = i0 + row < S;
    var rr = vec2<u32>(0u, 0u);
    if (row_ok) {
        rr = key_range(query_pos(i0 + row, kv_len), kv_len);
    }
    var m: f32 = MASKED;
    var l: f32 = 0.0;
    var poisoned = false;                   // a visible score was NaN: the row's output is NaN
    var poison: f32 = 0.0;                  // that NaN (WGSL has no NaN constant)

    var o: array<vec4<f32>, TM * DT4>;      // [i * DT4 + n]: row ty + i * RT, dims tx + n * CT
//!repeat a TM * DT4
    o[$a] = vec4<f32>(0.0);
//!end

    // Key ranges are intervals that move right with the query, so the block's first row bounds the tiles every
    // row sees whole (full_hi) and its last row where they start (full_lo, lo); hi is the union's end.
    let i_last = min(i0 + BLOCK_M, S) - 1u;
    let first = key_range(query_pos(i0, kv_len), kv_len);
    let last = key_range(query_pos(i_last, kv_len), kv_len);
    let lo = first.x;
    let hi = max(lo, last.y);

    for (var base: u32 = lo; base < hi; base += BLOCK_N) {
        let n_keys = min(BLOCK_N, hi - base);
        let tile_full = base >= last.x && base + n_keys <= first.y;

        // 1. S = Q K^T over head-dim chunks.
        var sacc: array<f32, TM * TN>;      // [i * TN + j]: row ty + i * RT, key tx + j * CT
//!repeat a TM * TN
        sacc[$a] = 0.0;
//!end
        for (var c0: u32 = 0u; c0 < ROW4; c0 += DC4) {
            for (var idx: u32 = t; idx < BLOCK_M * DC4; idx += WG) {
                let r = idx / DC4;
                let d4 = c0 + idx % DC4;
                var x = vec4<f32>(0.0);
                if (i0 + r < S && d4 < D4) {
                    x = vec4<f32>(q[((i0 + r) * params.num_heads + h) * D4 + d4]);
                }
                qs[r * QS + idx % DC4] = x;
            }
            for (var idx: u32 = t; idx < BLOCK_N * DC4; idx += WG) {
                let kk = idx / DC4;
                let d4 = c0 + idx % DC4;
                var x = vec4<f32>(0.0);
                if (kk < n_keys && d4 < D4) {
                    x = vec4<f32>(kv_k4((kv_row(base + kk) * params.num_kv_heads + g) * D4 + d4));
                }
                ks[kk * QS + idx % DC4] = x;
            }
            workgroupBarrier();
//!repeat c DC4
            {
//!repeat i TM
                let q$i = qs[(ty + ${i}u * RT) * QS + ${c}u];
//!end
//!repeat j TN
                let k$j = ks[(tx + ${j}u * CT) * QS + ${c}u];
//!end
//!repeat i TM
//!repeat j TN
                sacc[${i}u * TN + ${j}u] = fma(q$i.x, k$j.x, fma(q$i.y, k$j.y, fma(q$i.z, k$j.z, fma(q$i.w, k$j.w, sacc[${i}u * TN + ${j}u]))));
//!end
//!end
            }
//!end
            workgroupBarrier();             // the chunk is overwritten by the next one
        }
//!repeat j TN
//!repeat a TM4
        ps[((tx + ${j}u * CT) * RT + ty) * TM4 + ${a}u] = vec4<f32>(sacc[(${a}u * 4u) * TN + ${j}u],
            sacc[(${a}u * 4u + 1u) * TN + ${j}u], sacc[(${a}u * 4u + 2u) * TN + ${j}u], sacc[(${a}u * 4u + 3u) * TN + ${j}u]);
//!end
//!end
        workgroupBarrier();

        // 2. Online softmax of row `row` over its lanes' keys part + c * LPR.
        var sv: array<f32, KPL>;
        var tile_max: f32 = MASKED;
//!repeat c KPL
        {
            let kk = part + ${c}u * LPR;
            let at = p_slot(kk, row);
            var x = MASKED;
            if (kk < n_keys && base + kk >= rr.x && base + kk < rr.y) {
                x = transform_score(ps[at.x][at.y]);
                if (is_nan_f32(x)) {        // tile_max > MASKED_TEST would drop it
                    poisoned = true;
                    poison = x;
                }
            }
            sv[${c}u] = x;
            tile_max = max(tile_max, x);
        }
//!end
        for (var mask: u32 = 1u; mask < LPR; mask *= 2u) {
            tile_max = max(tile_max, subgroupShuffleXor(tile_max, mask));
        }
        // A row that sees no key of this tile keeps its state: corr 1, every p 0.
        let seen = tile_max > MASKED_TEST;
        let m_new = max(m, tile_max);
        var psum: f32 = 0.0;
//!repeat c KPL
        {
            let at = p_slot(part + ${c}u * LPR, row);
            let p = select(0.0, exp(sv[${c}u] - m_new), seen);
            ps[at.x][at.y] = p;
            psum += p;
        }
//!end
        for (var mask: u32 = 1u; mask < LPR; mask *= 2u) {
            psum += subgroupShuffleXor(psum, mask);
        }
        var corr: f32 = 1.0;
        if (seen) {
            corr = exp(m - m_new);
            l = l * corr + psum;
            m = m_new;
        }
        if (part == 0u) {
            corr_s[row] = corr;
        }
        workgroupBarrier();

        // 3. O = O * corr + P V over chunks of VC keys.
//!repeat i TM
        {
            let cr = corr_s[ty + ${i}u * RT];
//!repeat n DT4
            o[${i}u * DT4 + ${n}u] *= cr;
//!end
        }
//!end
        for (var k0: u32 = 0u; k0 < BLOCK_N; k0 += VC) {
            for (var idx: u32 = t; idx < VC * ROW4; idx += WG) {
                let kk = k0 + idx / ROW4;
                let d4 = idx % ROW4;
                var x = vec4<f32>(0.0);
                if (kk < n_keys && d4 < D4) {
                    x = vec4<f32>(kv_v4((kv_row(base + kk) * params.num_kv_heads + g) * D4 + d4));
                }
                vs[idx] = x;
            }
            workgroupBarrier();
            if (tile_full) {
//!repeat kk VC
                {
//!repeat a TM4
                    let p$a = ps[((k0 + ${kk}u) * RT + ty) * TM4 + ${a}u];
//!end
//!repeat n DT4
                    {
                        let vv = vs[${kk}u * ROW4 + tx + ${n}u * CT];
//!repeat a TM4
//!repeat c 4
                        o[(${a}u * 4u + ${c}u) * DT4 + ${n}u] = fma(vec4<f32>(p$a[$c]), vv, o[(${a}u * 4u + ${c}u) * DT4 + ${n}u]);
//!end
//!end
                    }
//!end
                }
//!end
            } else {
                // A key a row does not see has p == 0 and is skipped, not multiplied by 0 (NaN isolation).
//!repeat kk VC
                {
//!repeat a TM4
                    let p$a = ps[((k0 + ${kk}u) * RT + ty) * TM4 + ${a}u];
//!end
//!repeat n DT4
                    {
                        let vv = vs[${kk}u * ROW4 + tx + ${n}u * CT];
//!repeat a TM4
//!repeat c 4
                        if (p$a[$c] != 0.0) {
                            o[(${a}u * 4u + ${c}u) * DT4 + ${n}u] = fma(vec4<f32>(p$a[$c]), vv, o[(${a}u * 4u + ${c}u) * DT4 + ${n}u]);
                        }
//!end
//!end
                    }
//!end
                }
//!end
            }
            workgroupBarrier();             // vs and ps are rewritten next
        }
    }

    // The row's NaN, if any lane saw one, then 1 / l (0 for a row that sees no key: zeros, never NaN).
    var flag = select(0u, 1u, poisoned);
    for (var mask: u32 = 1u; mask < LPR; mask *= 2u) {
        let f2 = subgroupShuffleXor(flag, mask);
        let p2 = subgroupShuffleXor(poison, mask);
        if (flag == 0u && f2 != 0u) {
            flag = 1u;
            poison = p2;
        }
    }
    if (part == 0u) {
        var inv_l: f32 = 0.0;
        if (l > 0.0) {
            inv_l = 1.0 / l;
        }
        if (flag != 0u) {
            inv_l = poison;
        }
        corr_s[row] = inv_l;
        if (row_ok && params.write_lse != 0u) {
            lse[h * S + i0 + row] = select(lse_of(m, l), poison, flag != 0u);
        }
    }
    workgroupBarrier();
//!repeat i TM
    if (i0 + ty + ${i}u * RT < S) {
        let inv_l = corr_s[ty + ${i}u * RT];
        let ob = ((i0 + ty + ${i}u * RT) * params.num_heads + h) * D4;
//!repeat n DT4
        if (tx + ${n}u * CT < D4) {
            out[ob + tx + ${n}u * CT] = vec4<{{OUT_T}}>(o[${i}u * DT4 + ${n}u] * inv_l);
        }
//!end
    }
//!end
}
