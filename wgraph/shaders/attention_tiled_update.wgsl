        var tile_max: f32 = MASKED;
        for (var kk: u32 = 0u; kk < n_keys; kk++) {
            let s = s_tile[qi * TILE_N + kk];
            if (is_nan_f32(s)) {          // `s > MASKED_TEST` below would drop it silently
                poisoned = true;
                poison = s;
            }
            tile_max = max(tile_max, s);
        }
        if (tile_max > MASKED_TEST) {     // this query sees at least one key of the tile
            let m_new = max(m, tile_max);
            let corr = exp(m - m_new);
            for (var n: u32 = 0u; n < DIMS_PER_THREAD; n++) {
                acc[n] = acc[n] * corr;
            }
            var psum: f32 = 0.0;
            for (var kk: u32 = 0u; kk < n_keys; kk++) {
                let s = s_tile[qi * TILE_N + kk];
                if (s > MASKED_TEST) {
                    let p = exp(s - m_new);
                    psum += p;
                    for (var n: u32 = 0u; n < DIMS_PER_THREAD; n++) {
                        let d = sub + n * TPQ;
                        if (d < D) {
                            acc[n] += p * v_tile[kk * D + d];
                        }
                    }
                }
            }
            l = l * corr + psum;
            m = m_new;
        }