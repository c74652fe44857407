    var m: array<f32, G_TILE>;
    var l: array<f32, G_TILE>;
    var acc: array<vec4<f32>, Q4>;
//!repeat hh G_TILE
    m[$hh] = MASKED;
    l[$hh] = 0.0;
//!end
//!repeat i Q4
    acc[$i] = vec4<f32>(0.0);
//!end

    // K/V pieces of a step: [u * PPL + p]. Key indices are clamped into the chunk rather than guarded, so no
    // branch stands between the loads; a clamped key gets p = 0.
    var kw: array<vec4<u32>, U * PPL>;
    var vw: array<vec4<u32>, U * PPL>;
//!repeat u U
    {
        let r = kv_row(lo + min(${u}u * KS + slot, n - 1u)) * row_stride + col;
//!repeat p PPL
        kw[${u}u * PPL + ${p}u] = k[r + ${p}u * LPR];
        vw[${u}u * PPL + ${p}u] = v[r + ${p}u * LPR];
//!end
    }
//!end
    for (var kb: u32 = 0u; kb < n; kb += KS * U) {
        let kc = kw;
        let vc = vw;
//!repeat u U
        {
            let r = kv_row(lo + min(kb + KS * U + ${u}u * KS + slot, n - 1u)) * row_stride + col;
//!repeat p PPL
            kw[${u}u * PPL + ${p}u] = k[r + ${p}u * LPR];
            vw[${u}u * PPL + ${p}u] = v[r + ${p}u * LPR];
//!end
        }
//!end
        // partial dots s[u * G_TILE + hh], then summed over the slot's lanes
        var s: array<f32, U * G_TILE>;
//!repeat u U
//!repeat hh G_TILE
        {
            var d: f32 = 0.0;
//!repeat p PPL
//!repeat e PV4
            {
                var qv = qr[(${hh}u * PPL + ${p}u) * PV4 + ${e}u];
                if (Q_SHARED) {
                    qv = qw[${hh}u * (MAX_D / 4u) + (${p}u * LPR + lane) * PV4 + ${e}u];
                }
                d += dot(qv, piece(kc[${u}u * PPL + ${p}u], ${e}u));
            }
//!end
//!end
            s[${u}u * G_TILE + ${hh}u] = d;
        }
//!end
//!end
//!include attention_fused_reduce_{{REDUCE}}.wgsl
    }
//!include attention_fused_reduce_{{REDUCE}}_end.wgsl