    // q dims of the block's ng heads into the lanes' registers (attention_fused_lanes.wgsl's qr layout); q0 (set by
    // main): the index of the block's first head's dim 0, the heads' rows following each other.
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
