    // Merge the chunk's KS key slots into one (m, l, acc) per head and hand it to the including kernel's
    // store_ml(hh, m, l) (thread 0, each head hh < ng of the block) and store_acc(hh, d, sum, l) (dim d of head hh:
    // the acc weighted to the chunk's max m, with the head's l): a split-K kernel stores its chunk's partials
    // (attention_fused_store_partials.wgsl), the one-pass kernel the output. First the slots of one subgroup, by a
    // subgroupShuffleXor butterfly over the masks that cross slots (LPR .. the subgroup's size / 2; a slot's
    // lanes hold the same m and l, and lane i of every slot the same dims): no workgroup memory, no barrier.
    // Then the NST states left (one per subgroup; one per slot where a slot spans subgroups) through
    // workgroup memory: their m and l in one round, then their weighted acc, HR heads a round.
    let sg_live = min(sg_size, WG);               // a subgroup larger than the workgroup is partly empty
    for (var mask: u32 = LPR; mask < sg_live; mask *= 2u) {
//!repeat hh G_TILE
        {
            let mo = subgroupShuffleXor(m[$hh], mask);
            let lo2 = subgroupShuffleXor(l[$hh], mask);
            let mn = max(m[$hh], mo);
            let wa = exp(m[$hh] - mn);
            let wb = exp(mo - mn);
            m[$hh] = mn;
            l[$hh] = l[$hh] * wa + lo2 * wb;
//!repeat p PPL
//!repeat e PV4
            acc[(${hh}u * PPL + ${p}u) * PV4 + ${e}u] = acc[(${hh}u * PPL + ${p}u) * PV4 + ${e}u] * wa
                + subgroupShuffleXor(acc[(${hh}u * PPL + ${p}u) * PV4 + ${e}u], mask) * wb;
//!end
//!end
        }
//!end
    }
    let ST = max(sg_live, LPR);                   // threads of one state
    let NST = WG / ST;                            // states left
    let st = t / ST;
    let holder = t % ST < LPR;                    // the first slot of a state holds its values
    workgroupBarrier();                           // the last step's partial dots in red are read
    if (holder && lane == 0u) {
//!repeat hh G_TILE
        red[(${hh}u * NST + st) * 2u] = m[$hh];
        red[(${hh}u * NST + st) * 2u + 1u] = l[$hh];
//!end
    }
    workgroupBarrier();
    var mw: array<f32, G_TILE>;                   // the chunk's max per head
    var lt: array<f32, G_TILE>;                   // the chunk's l per head
//!repeat hh G_TILE
    {
        var mm = MASKED;
        for (var r: u32 = 0u; r < NST; r++) {
            mm = max(mm, red[(${hh}u * NST + r) * 2u]);
        }
        var ll = 0.0;
        for (var r: u32 = 0u; r < NST; r++) {
            ll += exp(red[(${hh}u * NST + r) * 2u] - mm) * red[(${hh}u * NST + r) * 2u + 1u];
        }
        lt[$hh] = ll;
        mw[$hh] = mm;
    }
//!end
    if (t == 0u) {
//!repeat hh G_TILE
        if (${hh}u < ng) {
            store_ml(${hh}u, mw[$hh], lt[$hh]);
        }
//!end
    }
    let HR = max(1u, RED_N / (NST * D));          // heads whose states fit red at once
    for (var r0: u32 = 0u; r0 < ng; r0 += HR) {
        workgroupBarrier();                       // red's previous contents are read
        if (holder) {
//!repeat hh G_TILE
            if (${hh}u >= r0 && ${hh}u < r0 + HR) {
                let wgt = exp(m[$hh] - mw[$hh]);
//!repeat p PPL
//!repeat e PV4
                {
                    let a = acc[(${hh}u * PPL + ${p}u) * PV4 + ${e}u] * wgt;
                    let at = ((${hh}u - r0) * NST + st) * D + (${p}u * LPR + lane) * ELEMS + ${e}u * 4u;
                    red[at] = a.x;
                    red[at + 1u] = a.y;
                    red[at + 2u] = a.z;
                    red[at + 3u] = a.w;
                }
//!end
//!end
            }
//!end
        }
        workgroupBarrier();
        let nh = min(HR, ng - r0);
        for (var i: u32 = t; i < nh * D; i += WG) {
            let hr = i / D;
            let d = i % D;
            var sum: f32 = 0.0;
            for (var r: u32 = 0u; r < NST; r++) {
                sum += red[(hr * NST + r) * D + d];
            }
            store_acc(r0 + hr, d, sum, lt[r0 + hr]);
        }
    }