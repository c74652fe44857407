        for (var idx: u32 = t; idx < TILE_N * D; idx += WG) {
            let kk = idx / D;
            let d = idx % D;
            var kx: f32 = 0.0;
            var vx: f32 = 0.0;
            if (kk < n_keys) {
                let at = kv_index(kv_row(base + kk), g, d);
                kx = kv_k1(at);
                vx = kv_v1(at);
            }
            k_tile[kk * D + d] = kx;
            v_tile[kk * D + d] = vx;
        }
        workgroupBarrier();