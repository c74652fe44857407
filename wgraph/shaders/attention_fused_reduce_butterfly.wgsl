        if (LPR <= sg_size) {
            for (var mask: u32 = LPR / 2u; mask > 0u; mask /= 2u) {
//!repeat i U * G_TILE
                s[$i] += subgroupShuffleXor(s[$i], mask);
//!end
            }
        } else {
//!include attention_fused_slot_sums_workgroup.wgsl
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