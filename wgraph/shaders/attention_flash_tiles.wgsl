    for (var base: u32 = lo; base < hi; base += TILE_N) {
        let n_keys = min(TILE_N, hi - base);
        for (var idx: u32 = t; idx < TILE4; idx += WG) {
            let kk = idx / ROW4;
            let d4 = idx % ROW4;
            var kx = vec4<f32>(0.0);
            var vx = vec4<f32>(0.0);
            if (kk < n_keys && d4 < D4) {
                let at = (kv_row(base + kk) * params.num_kv_heads + g) * D4 + d4;
                kx = vec4<f32>(kv_k4(at));
                vx = vec4<f32>(kv_v4(at));
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

        // P.V in f32, each product added to the f32 accumulator. A key a row does not see is skipped, not
        // multiplied by 0: a NaN in that key's V must not reach this row (docs/errors.md). The branch is uniform
        // wherever a tile is fully visible. (A tile's P.V summed in vec4<f16> FMAs before it was added broke
        // FlashAttention's error rule by up to 1.6x: 8 or 16 f16 roundings of a sum near 1.)
//!repeat kk TILE_N
//!repeat r R
        if (s[${r}u * TILE_N + ${kk}u] != 0.0) {
            let p = s[${r}u * TILE_N + ${kk}u];
//!repeat n DPT4
            o[${r}u * DPT4 + ${n}u] += p * v_tile[${kk}u * ROW4 + part + ${n}u * TPQ];
//!end
        }
//!end
//!end
        workgroupBarrier();               // the tiles are rewritten by the next step
    }