        // REDUCE = "scatter" (docs/attention.md): the slot's sums by a reduce-scatter instead of a butterfly per value,
        // and one exp per (key, head) pair instead of every pair's in every lane. Over the masks LPR / 2, LPR / 4, ..
        // a lane keeps half of its live values (the upper half where its lane bit is set) and adds the partner's
        // copy of that half: NV - 1 shuffles where the butterfly takes NV * log2(LPR), the same additions in the same
        // order (bit for bit the butterfly's sums). Value bit NV >> (k + 1) goes with lane bit LPR >> (k + 1), so
        // where LPR >= NV lane j of a slot ends with the full sum of pair j / rep (rep = LPR / NV lanes a pair,
        // summed by plain xor-sums over the low lane bits). That lane applies transform_score and the mask, the
        // head's step max comes from a max-butterfly over the lanes of its U keys (lane bits rep * G_TILE ..), and
        // it takes p and alpha = exp(m - m_new) itself (m: that head's running max, kept in its m[0]); every lane
        // then reads the NV p's and G_TILE alphas by subgroupShuffle (slot_base + j: a subgroup holds several
        // slots, so subgroupBroadcast's one lane would be wrong). attention_fused_reduce_scatter_end.wgsl hands
        // every lane each head's m after the loop. Where LPR < NV (lanes hold NV / LPR pairs: head_dim 64 at
        // G_TILE 4 and 4 keys) the sums go back to every lane and the butterfly's softmax runs (NV - 1 + NV
        // shuffles), as where a slot spans subgroups (workgroup memory, unchanged).
        const SC_P0: u32 = 2u;
        const SC_P1: u32 = 4u;
        const SC_P2: u32 = 8u;
        const SC_P3: u32 = 16u;
        const SC_P4: u32 = 32u;
        // log2(NV): the reduce-scatter's stages (NV = U * G_TILE, 2 .. 32: the consts above)
        const SC_LOGN: u32 = (min(U * G_TILE / 2u, 1u) + min(U * G_TILE / 4u, 1u) + min(U * G_TILE / 8u, 1u)
            + min(U * G_TILE / 16u, 1u) + min(U * G_TILE / 32u, 1u));
        const_assert U * G_TILE >= 2u && U * G_TILE <= 32u;
        var pp: array<f32, U * G_TILE>;           // p of key u, head hh at u * G_TILE + hh, in every lane
        var al: array<f32, G_TILE>;               // each head's alpha, in every lane
        if (LPR <= sg_size && LPR >= U * G_TILE) {
            let rep = LPR / (U * G_TILE);         // lanes holding one pair
            let base = sg_lane - lane;            // the slot's first lane in the subgroup
//!repeat k SC_LOGN
            {
                let mask = LPR / SC_P$k;
                let hi = (lane & mask) != 0u;
//!repeat i U * G_TILE / SC_P$k
                {
                    let send = select(s[$i + U * G_TILE / SC_P$k], s[$i], hi);
                    let keep = select(s[$i], s[$i + U * G_TILE / SC_P$k], hi);
                    s[$i] = keep + subgroupShuffleXor(send, mask);
                }
//!end
            }
//!end
            for (var mask: u32 = rep / 2u; mask > 0u; mask /= 2u) {
                s[0] += subgroupShuffleXor(s[0], mask);
            }
            let pair = lane / rep;                // u * G_TILE + hh
            let valid = kb + (pair / G_TILE) * KS + slot < n;
            let so = transform_score(s[0]);
            var mx = select(MASKED, so, valid);
            for (var mask: u32 = rep * G_TILE; mask < LPR; mask *= 2u) {
                mx = max(mx, subgroupShuffleXor(mx, mask));
            }
            mx = max(m[0], mx);
            let alpha = exp(m[0] - mx);
            let po = select(0.0, exp(so - mx), valid);
            m[0] = mx;
//!repeat i U * G_TILE
            pp[$i] = subgroupShuffle(po, base + ${i}u * rep);
//!end
//!repeat hh G_TILE
            al[$hh] = subgroupShuffle(alpha, base + ${hh}u * rep);
//!end
        } else {
            if (LPR <= sg_size) {
                // LPR < NV: the stages that have a lane bit (value bit NV >> (k + 1) with lane bit LPR >> (k + 1)),
                // each result written to every position that differs only in the bits resolved so far, so that
                // position j of lane j / c (c = NV / LPR) holds pair j's full sum: NV shuffles hand every lane all
                let base = sg_lane - lane;
//!repeat k SC_LOGN
                if (LPR >= SC_P$k) {
                    let mask = LPR / SC_P$k;
                    let hi = (lane & mask) != 0u;
//!repeat i U * G_TILE / SC_P$k
                    {
                        let send = select(s[$i + U * G_TILE / SC_P$k], s[$i], hi);
                        let keep = select(s[$i], s[$i + U * G_TILE / SC_P$k], hi);
                        let r = keep + subgroupShuffleXor(send, mask);
//!repeat j SC_P$k
                        s[$i + ${j}u * (U * G_TILE / SC_P$k)] = r;
//!end
                    }
//!end
                }
//!end
                let c = U * G_TILE / LPR;
                var full: array<f32, U * G_TILE>;
//!repeat i U * G_TILE
                full[$i] = subgroupShuffle(s[$i], base + ${i}u / c);
//!end
                s = full;
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
            // the butterfly's softmax: every lane every head's max, alpha and p
//!repeat hh G_TILE
            {
                var mx = m[$hh];
//!repeat u U
                let valid$u = kb + ${u}u * KS + slot < n;
                let s$u = transform_score(s[${u}u * G_TILE + ${hh}u]);
                mx = max(mx, select(MASKED, s$u, valid$u));
//!end
                al[$hh] = exp(m[$hh] - mx);
                m[$hh] = mx;
//!repeat u U
                pp[${u}u * G_TILE + ${hh}u] = select(0.0, exp(s$u - mx), valid$u);
//!end
            }
//!end
        }
        // one online-softmax update per head for the step's U keys
//!repeat hh G_TILE
        {
            var ls = l[$hh] * al[$hh];
//!repeat u U
            ls += pp[${u}u * G_TILE + ${hh}u];
//!end
            l[$hh] = ls;
//!repeat p PPL
//!repeat e PV4
            {
                var a = acc[(${hh}u * PPL + ${p}u) * PV4 + ${e}u] * al[$hh];
//!repeat u U
                a += pp[${u}u * G_TILE + ${hh}u] * piece(vc[${u}u * PPL + ${p}u], ${e}u);
//!end
                acc[(${hh}u * PPL + ${p}u) * PV4 + ${e}u] = a;
            }
//!end
//!end
        }
//!end