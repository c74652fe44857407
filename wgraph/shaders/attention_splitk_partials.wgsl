        for (var d: u32 = t; d < D; d += WG) {
            var s: f32 = 0.0;
            for (var r: u32 = 0u; r < KS; r++) {
                s += red[r * D + d];
            }
            part_acc[sl * D + d] = s;
        }
        if (t == 0u) {
            part_ml[sl * 2u] = stat[${hh}u];
            part_ml[sl * 2u + 1u] = stat[G_TILE + ${hh}u];
        }