        // REDUCE = "scatter" (docs/attention.md): the slot's sums by a reduce-scatter instead of a butterfly per value,
        // and one exp per (key, head) pair instead of every pair's in every lane. Over the masks LPR / 2, LPR / 4, ..
        // a lane keeps half of its live values (the upper half where its lane bit is set) and adds the partner's
        // copy of that half: NV - 1 shuffles where the butterfly takes NV * log2(LPR), the same additions in the same
        // order (bit for bit the butterfly's sums). Value bit NV >> (k + 1) goes with lane bit LPR >> (k + 1), so a
        // lane ends with the full sums of C = max(NV / LPR, 1) pairs, (lane / rep) * C + j for j < C (rep =
        // LPR / NV lanes a pair where LPR > NV, summed by plain xor-sums over the low lane bits). Pair u * G_TILE + hh
        // is key u, head hh: where C <= G_TILE a lane's pairs are C heads of one key, and the lane applies
        // transform_score and the mask to each, takes the head's step max by a max-butterfly over the lanes of its U
        // keys (lane bits rep * G_TILE / C ..), then p and alpha = exp(m - m_new) itself (m: that head's running max,
        // kept in the lane's m[j]); every lane then reads the NV p's and G_TILE alphas by subgroupShuffle (slot_base
        // + lane: a subgroup holds several slots, so subgroupBroadcast's one lane would be wrong). C is known at
        // compile time on each of the log2(G_TILE) + 1 paths (the register arrays need constant indices); the one
        // whose C the head_dim gives runs. attention_fused_reduce_scatter_end.wgsl hands every lane each head's m
        // after the loop. Where C > G_TILE (head_dim 8-16) the sums go back to every lane (NV more shuffles) and
        // the butterfly's softmax runs, as where a slot spans subgroups (workgroup memory, unchanged).
        const SC_P0: u32 = 2u;
        const SC_P1: u32 = 4u;
        const SC_P2: u32 = 8u;
        const SC_P3: u32 = 16u;
        const SC_P4: u32 = 32u;
        const SC_C0: u32 = 1u;                    // SC_Cx = 2^x: the pairs a lane holds on own-pair path x
        const SC_C1: u32 = 2u;
        const SC_C2: u32 = 4u;
        const SC_C3: u32 = 8u;
        // log2(NV): the reduce-scatter's stages (NV = U * G_TILE, 2 .. 32: the consts above); log2(G_TILE) + 1 paths
        const SC_LOGN: u32 = (min(U * G_TILE / 2u, 1u) + min(U * G_TILE / 4u, 1u) + min(U * G_TILE / 8u, 1u)
            + min(U * G_TILE / 16u, 1u) + min(U * G_TILE / 32u, 1u));
        const SC_PATHS: u32 = 1u + min(G_TILE / 2u, 1u) + min(G_TILE / 4u, 1u) + min(G_TILE / 8u, 1u);
        const_assert U * G_TILE >= 2u && U * G_TILE <= 32u && G_TILE <= 8u;
        var pp: array<f32, U * G_TILE>;           // p of key u, head hh at u * G_TILE + hh, in every lane
        var al: array<f32, G_TILE>;               // each head's alpha, in every lane
        // own: C = NV / LPR pairs a lane (1 where LPR >= NV) and C <= G_TILE, so they are C heads of one key
        let own = LPR <= sg_size && max(U * G_TILE / LPR, 1u) <= G_TILE;
        if (own) {
            let rep = max(LPR / (U * G_TILE), 1u);   // lanes holding one pair
            let base = sg_lane - lane;            // the slot's first lane in the subgroup
//!repeat cc SC_PATHS
            if (max(U * G_TILE / LPR, 1u) == SC_C$cc) {
                // C = SC_C$cc: the stages down to C values (those with a lane bit)
//!repeat k SC_LOGN
                if (U * G_TILE / SC_P$k >= SC_C$cc) {
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
//!repeat j SC_C$cc
                    s[$j] += subgroupShuffleXor(s[$j], mask);
//!end
                }
                // position j: pair (lane / rep) * C + j, of key `key` and head (pair0 % G_TILE) + j
                let pair0 = (lane / rep) * SC_C$cc;
                let valid = kb + (pair0 / G_TILE) * KS + slot < n;
                var po: array<f32, SC_C$cc>;
                var ao: array<f32, SC_C$cc>;
//!repeat j SC_C$cc
                {
                    let so = transform_score(s[$j]);
                    var mx = select(MASKED, so, valid);
                    for (var mask: u32 = rep * G_TILE / SC_C$cc; mask < LPR; mask *= 2u) {
                        mx = max(mx, subgroupShuffleXor(mx, mask));
                    }
                    mx = max(m[$j], mx);
                    ao[$j] = exp(m[$j] - mx);
                    po[$j] = select(0.0, exp(so - mx), valid);
                    m[$j] = mx;
                }
//!end
//!repeat i U * G_TILE
                pp[$i] = subgroupShuffle(po[${i}u % SC_C$cc], base + (${i}u / SC_C$cc) * rep);
//!end
//!repeat hh G_TILE
                al[$hh] = subgroupShuffle(ao[${hh}u % SC_C$cc], base + (${hh}u / SC_C$cc) * rep);
//!end
            }
//!end
        } else {
            if (LPR <= sg_size) {
                // C > G_TILE: the stages that have a lane bit (value bit NV >> (k + 1) with lane bit LPR >> (k + 1)),
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
//!include attention_fused_slot_sums_workgroup.wgsl
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