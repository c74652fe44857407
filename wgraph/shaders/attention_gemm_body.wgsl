// The GEMM-shaped flash kernel's body (attention_prefill_gemm.wgsl describes it), included inside main by the
// single-sequence and the batched kernel. main defines before it: t, sg, sg_size, lane (builtins), h, g (q and kv
// head), D4, S (the sequence's queries), q0 (its first q row), i0 (the block's first query), lse0 (lse index of
// query 0 of the sequence in head h), and the functions row_keys(i) (the keys [lo, hi) query i sees) and kv_row.
    let ty = t / CT;
    let tx = t % CT;

    // The softmax lanes of a row are neighbours in one subgroup, whatever order the device numbers them.
    let vt = sg * sg_size + lane;
    let row = vt / LPR;
    let part = vt % LPR;
    let row_ok = i0 + row < S;
    var rr = vec2<u32>(0u, 0u);
    if (row_ok) {
        rr = row_keys(i0 + row);
    }
    var m: f32 = MASKED;
    var l: f32 = 0.0;
    var poisoned = false;                   // a visible score was NaN: the row's output is NaN
    var poison: f32 = 0.0;                  // that NaN (WGSL has no NaN constant)

    var o: array<vec4<f32>, TM * DT4>;      // [i * DT4 + n]: row ty + i * RT, dims tx + n * CT
//!repeat a TM * DT4
    o[$a] = vec4<f32>(0.0);
//!end

    // Key ranges are intervals that move right with the query: a tile inside [last.x, first.y) is seen whole by
    // every row of the block; [first.x, last.y) is the union of the rows' keys.
    let i_last = min(i0 + BLOCK_M, S) - 1u;
    let first = row_keys(i0);
    let last = row_keys(i_last);
    let lo = first.x;
    let hi = max(lo, last.y);

    var sl: Slots;
//!repeat n NQ
    {
        let idx = t + ${n}u * WG;
        sl.q_at[$n] = ((q0 + i0 + idx / DC4) * params.num_heads + h) * D4 + idx % DC4;
        sl.q_ok[$n] = idx < BLOCK_M * DC4 && i0 + idx / DC4 < S;
    }
//!end

    for (var base: u32 = lo; base < hi; base += BLOCK_N) {
        let n_keys = min(BLOCK_N, hi - base);
        let tile_full = base >= last.x && base + n_keys <= first.y;
//!repeat n NK
        {
            let idx = t + ${n}u * WG;
            sl.k_ok[$n] = idx < BLOCK_N * DC4 && idx / DC4 < n_keys;
            sl.k_at[$n] = 0u;
            if (sl.k_ok[$n]) {
                sl.k_at[$n] = (kv_row(base + idx / DC4) * params.num_kv_heads + g) * D4 + idx % DC4;
            }
        }
//!end

        // 1. S = Q K^T over head-dim chunks; the next chunk's loads are in flight during a chunk's FMAs (PREFETCH).
        // A score sums one vec4 of products at a time, then adds it: one serial fma chain over all head dims erred
        // 1.1x FlashAttention's bound with q and k ~ 4 N(0, 1) at D 120 (h200_check.py's mag = 4 case; a float32
        // emulation of that chain alone gives the same 5e-5), 0.5x summed by vec4s.
        var sacc: array<f32, TM * TN>;      // [i * TN + j]: row ty + i * RT, key tx + j * CT
//!repeat a TM * TN
        sacc[$a] = 0.0;
//!end
        var qk = stage_qk(sl, t, 0u, D4);
        for (var c0: u32 = 0u; c0 < ROW4; c0 += DC4) {
//!repeat n NQ
            if (t + ${n}u * WG < BLOCK_M * DC4) {
                smem[qs_at((t + ${n}u * WG) / DC4, (t + ${n}u * WG) % DC4)] = vec4<f32>(qk.q[$n]);
            }
//!end
//!repeat n NK
            if (t + ${n}u * WG < BLOCK_N * DC4) {
                smem[ks_at((t + ${n}u * WG) / DC4, (t + ${n}u * WG) % DC4)] = vec4<f32>(qk.k[$n]);
            }
//!end
            workgroupBarrier();
            if (PREFETCH && c0 + DC4 < ROW4) {
                qk = stage_qk(sl, t, c0 + DC4, D4);
            }
//!repeat c DC4
            {
//!repeat i TM
                let q$i = smem[qs_at(ty + ${i}u * RT, ${c}u)];
//!end
//!repeat j TN
                let k$j = smem[ks_at(tx + ${j}u * CT, ${c}u)];
//!end
//!repeat i TM
//!repeat j TN
                sacc[${i}u * TN + ${j}u] += dot(q$i, k$j);
//!end
//!end
            }
//!end
            workgroupBarrier();             // the chunk is overwritten by the next one
            if (!PREFETCH && c0 + DC4 < ROW4) {
                qk = stage_qk(sl, t, c0 + DC4, D4);
            }
        }
//!repeat j TN
//!repeat a TM4
        smem[ps_at(tx + ${j}u * CT, ty * TM4 + ${a}u)] = vec4<f32>(sacc[(${a}u * 4u) * TN + ${j}u],
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
                x = transform_score(smem[ps_at(at.x, at.y)][at.z]);
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
            smem[ps_at(at.x, at.y)][at.z] = p;
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
        var vr = stage_v(t, base, 0u, n_keys, g, D4);
        for (var k0: u32 = 0u; k0 < n_keys; k0 += VC) {   // chunks past the tile's keys hold only p == 0: skipped
//!repeat n NV
            if (t + ${n}u * WG < VC * ROW4) {
                smem[vs_at((t + ${n}u * WG) / ROW4, (t + ${n}u * WG) % ROW4)] = vec4<f32>(vr[$n]);
            }
//!end
            workgroupBarrier();
            if (PREFETCH && k0 + VC < n_keys) {
                vr = stage_v(t, base, k0 + VC, n_keys, g, D4);
            }
            if (tile_full) {
//!repeat kk VC
                {
//!repeat a TM4
                    let p$a = smem[ps_at(k0 + ${kk}u, ty * TM4 + ${a}u)];
//!end
//!repeat n DT4
                    {
                        let vv = smem[vs_at(${kk}u, tx + ${n}u * CT)];
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
                    let p$a = smem[ps_at(k0 + ${kk}u, ty * TM4 + ${a}u)];
//!end
//!repeat n DT4
                    {
                        let vv = smem[vs_at(${kk}u, tx + ${n}u * CT)];
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
            workgroupBarrier();             // vs is rewritten next, ps and vs by the next tile's qs and ks
            if (!PREFETCH && k0 + VC < n_keys) {
                vr = stage_v(t, base, k0 + VC, n_keys, g, D4);
            }
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
            lse[lse0 + i0 + row] = select(lse_of(m, l), poison, flag != 0u);
        }
    }
    workgroupBarrier();
//!repeat i TM
    if (i0 + ty + ${i}u * RT < S) {
        let inv_l = corr_s[ty + ${i}u * RT];
        let ob = ((q0 + i0 + ty + ${i}u * RT) * params.num_heads + h) * D4;
//!repeat n DT4
        if (tx + ${n}u * CT < D4) {
            out[ob + tx + ${n}u * CT] = vec4<{{OUT_T}}>(o[${i}u * DT4 + ${n}u] * inv_l);
        }
//!end
    }
//!end
