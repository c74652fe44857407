    // q dims of the block's ng heads, where the steps read them (q0, set by main: the index of the block's first
    // head's dim 0, the heads' rows following each other). In the lanes' registers (attention_fused_lanes.wgsl's
    // qr layout; every slot holds a copy), or with Q_SHARED once in workgroup memory, qw[hh * MAX_D / 4 + d / 4]
    // (Q4 vec4 registers a lane free for loads in flight: issue 25's bound), then a barrier.
    if (Q_SHARED) {
        for (var i = t; i < G_TILE * (MAX_D / 4u); i += WG) {
            let hh = i / (MAX_D / 4u);
            let d = (i % (MAX_D / 4u)) * 4u;
            var x = vec4<f32>(0.0);
            if (hh < ng && d < D) {
                let qb = q0 + hh * D + d;
                x = vec4<f32>(f32(q[qb]), f32(q[qb + 1u]), f32(q[qb + 2u]), f32(q[qb + 3u]));
            }
            qw[i] = x;
        }
        workgroupBarrier();
    } else {
//!repeat hh G_TILE
//!repeat p PPL
//!repeat e PV4
        {
            var x = vec4<f32>(0.0);
            if (${hh}u < ng) {
                let qb = q0 + ${hh}u * D + (${p}u * LPR + lane) * ELEMS + ${e}u * 4u;
                x = vec4<f32>(f32(q[qb]), f32(q[qb + 1u]), f32(q[qb + 2u]), f32(q[qb + 3u]));
            }
            qr[(${hh}u * PPL + ${p}u) * PV4 + ${e}u] = x;
        }
//!end
//!end
//!end
    }
