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
        if (LPR <= sg_size) {
            for (var mask: u32 = LPR / 2u; mask > 0u; mask /= 2u) {
//!repeat i U * G_TILE
                s[$i] += subgroupShuffleXor(s[$i], mask);
//!end
            }
        } else {
            // a slot spans subgroups (a device whose subgroups are smaller than LPR, such as lavapipe's 8
            // lanes at head_dim 128): the lanes' partials meet in workgroup memory, two barriers a step
            workgroupBarrier();                  // the previous step's sums are read
//!repeat i U * G_TILE
            red[(slot * LPR + lane) * U * G_TILE + ${i}u] = s[$i];
//!end
            workgroupBarrier();
//!repeat i U * G_TILE
            {
                var sum: f32 = 0.0;
                for (var l2: u32 = 0u; l2 < LPR; l2++) {
                    sum += red[(slot * LPR + l2) * U * G_TILE + ${i}u];
                }
                s[$i] = sum;
            }
//!end
        }
        // one online-softmax update per head for the step's U keys
//!repeat hh G_TILE
        {
            var mx = m[$hh];
//!repeat u U
            let valid$u = kb + ${u}u * KS + slot < n;
            let s$u = transform_score(s[${u}u * G_TILE + ${hh}u]);
            mx = max(mx, select(MASKED, s$u, valid$u));
//!end
            let alpha = exp(m[$hh] - mx);
            m[$hh] = mx;
            var ls = l[$hh] * alpha;
//!repeat u U
            let p$u = select(0.0, exp(s$u - mx), valid$u);
            ls += p$u;
//!end
            l[$hh] = ls;
//!repeat p PPL
//!repeat e PV4
            {
                var a = acc[(${hh}u * PPL + ${p}u) * PV4 + ${e}u] * alpha;
//!repeat u U
                a += p$u * piece(vc[${u}u * PPL + ${p}u], ${e}u);
//!end
                acc[(${hh}u * PPL + ${p}u) * PV4 + ${e}u] = a;
            }
//!end
//!end
        }
//!end
    }