//!repeat hh G_TILE
    if (${hh}u < ng) {
        let wgt = exp(m[$hh] - mw[$hh]);
        workgroupBarrier();                      // red's previous contents are read
//!repeat p PPL
//!repeat e PV4
        {
            let a = acc[(${hh}u * PPL + ${p}u) * PV4 + ${e}u] * wgt;
            let at = slot * D + (${p}u * LPR + lane) * ELEMS + ${e}u * 4u;
            red[at] = a.x;
            red[at + 1u] = a.y;
            red[at + 2u] = a.z;
            red[at + 3u] = a.w;
        }
//!end
//!end
        workgroupBarrier();
        let sl = sl0 + ${hh}u * params.num_chunks;
        for (var d: u32 = t; d < D; d += WG) {
            var sum: f32 = 0.0;
            for (var r: u32 = 0u; r < KS; r++) {
                sum += red[r * D + d];
            }
            part_acc[sl * D + d] = sum;
        }
        if (t == 0u) {
            part_ml[sl * 2u] = mw[$hh];
            part_ml[sl * 2u + 1u] = lt[$hh];
        }
    }
//!end