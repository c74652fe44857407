    // The staged walk of one chunk (attention_decode_staged.wgsl's header): needs t, g, D, ng, lo, n and q0 (the
    // block's first head's dim 0; the heads' rows follow each other) from main, and part_slot set for the
    // stores (attention_fused_store_partials.wgsl).
    let D4 = D / 4u;
    let RP = D / ELEMS;
    let row_stride = params.num_kv_heads * RP;   // pieces from one k/v row to the next
    for (var i = t; i < G_TILE * MAX_D4; i += WG) {
        let hh = i / MAX_D4;
        let d4 = i % MAX_D4;
        var x = vec4<f32>(0.0);
        if (hh < ng && d4 < D4) {
            let qb = q0 + hh * D + d4 * 4u;
            x = vec4<f32>(f32(q[qb]), f32(q[qb + 1u]), f32(q[qb + 2u]), f32(q[qb + 3u]));
        }
        qs[hh][d4] = x;
    }
    let sl = staging_slots(t, RP, g * RP);
    var st = stage_load(sl, lo, 0u, n, row_stride);

    let kk = t % T;                    // score pass: key kk, dims d4 = dp, dp + NDP, ...
    let dp = t / T;
    let NPART = WG / D4;               // P.V: unit pv_d4 of every head's output over keys pv_part + j * NPART
    let pv_d4 = t % D4;
    let pv_part = t / D4;
    let pv_on = pv_part < NPART;
    var acc: array<vec4<f32>, G_TILE>;
    var lsum: array<vec4<f32>, GV4>;   // the P.V thread's share of l (its keys), per head
    var mrun: array<vec4<f32>, GV4>;   // the heads' running max, as the P.V threads hold it
    var msm: array<f32, NSM>;          // the running max of each softmax pair's head
//!repeat hh G_TILE
    acc[$hh] = vec4<f32>(0.0);
//!end
//!repeat j GV4
    lsum[$j] = vec4<f32>(0.0);
    mrun[$j] = vec4<f32>(MASKED);
//!end
//!repeat j NSM
    msm[$j] = MASKED;
//!end

    for (var kb: u32 = 0u; kb < n; kb += T) {
        workgroupBarrier();            // the last tile's K, V and p are read
        stage_store(sl, st);
        workgroupBarrier();
        if (kb + T < n) {
            st = stage_load(sl, lo, kb + T, n, row_stride);   // in flight while this tile is summed
        }
        // 1. partial q.k of key kk over this thread's dims, for every head of the block
        var part: array<f32, G_TILE>;
//!repeat hh G_TILE
        part[$hh] = 0.0;
//!end
        for (var d4 = dp; d4 < D4; d4 += NDP) {
            let kf = unit_f32(ks[kk][d4]);
//!repeat hh G_TILE
            part[$hh] += dot(qs[$hh][d4], kf);
//!end
        }
//!repeat hh G_TILE
        sp[(dp * G_TILE + ${hh}u) * T + kk] = part[$hh];
//!end
        workgroupBarrier();
        // 2. the (head, key) pairs' scores: the parts summed, transformed, MASKED past the chunk's keys
        var sv: array<f32, NSM>;
//!repeat j NSM
        {
            let i = t + ${j}u * WG;
            sv[$j] = MASKED;
            if (i < G_TILE * T) {
                let hh = i / T;
                let key = i % T;
                var s: f32 = 0.0;
                for (var p: u32 = 0u; p < NDP; p++) {
                    s += sp[(p * G_TILE + hh) * T + key];
                }
                if (kb + key < n) {
                    sv[$j] = transform_score(s);
                }
                sc[i / 4u][i % 4u] = sv[$j];
            }
        }
//!end
        workgroupBarrier();
        // 3. each pair's head's new max over the tile, its p; the key-0 pair publishes the head's max
//!repeat j NSM
        {
            let i = t + ${j}u * WG;
            if (i < G_TILE * T) {
                let hh = i / T;
                let key = i % T;
                var mx = msm[$j];
                for (var r: u32 = 0u; r < T / 4u; r++) {
                    let s4 = sc[hh * (T / 4u) + r];
                    mx = max(mx, max(max(s4.x, s4.y), max(s4.z, s4.w)));
                }
                msm[$j] = mx;
                pp[key * GV4 + hh / 4u][hh % 4u] = select(0.0, exp(sv[$j] - mx), kb + key < n);
                if (key == 0u) {
                    mt[hh / 4u][hh % 4u] = mx;
                }
            }
        }
//!end
        workgroupBarrier();
        // 4. P.V: rescale to the new max, then this thread's keys of the tile
        if (pv_on) {
//!repeat j GV4
            {
                let mn = mt[$j];
                let alpha = exp(mrun[$j] - mn);
                mrun[$j] = mn;
                lsum[$j] *= alpha;
                acc[${j}u * 4u] *= alpha.x;
                acc[${j}u * 4u + 1u] *= alpha.y;
                acc[${j}u * 4u + 2u] *= alpha.z;
                acc[${j}u * 4u + 3u] *= alpha.w;
            }
//!end
            for (var key = pv_part; key < T; key += NPART) {
                let vf = unit_f32(vs[key][pv_d4]);
//!repeat j GV4
                {
                    let p4 = pp[key * GV4 + ${j}u];
                    lsum[$j] += p4;
                    acc[${j}u * 4u] += p4.x * vf;
                    acc[${j}u * 4u + 1u] += p4.y * vf;
                    acc[${j}u * 4u + 2u] += p4.z * vf;
                    acc[${j}u * 4u + 3u] += p4.w * vf;
                }
//!end
            }
        }
    }

    // The chunk's (m, l, acc) per head. Every P.V thread holds the heads' max (mrun); l and acc are summed over
    // the NPART key parts through sp: the l's first, then one head's acc a round.
    workgroupBarrier();
    if (pv_on && pv_d4 == 0u) {
//!repeat hh G_TILE
        sp[pv_part * G_TILE + ${hh}u] = lsum[${hh}u / 4u][${hh}u % 4u];
//!end
    }
    workgroupBarrier();
    var lt: array<f32, G_TILE>;
//!repeat hh G_TILE
    {
        var s: f32 = 0.0;
        for (var p: u32 = 0u; p < NPART; p++) {
            s += sp[p * G_TILE + ${hh}u];
        }
        lt[$hh] = s;
    }
//!end
    if (t == 0u) {
//!repeat hh G_TILE
        if (${hh}u < ng) {
            store_ml(${hh}u, mrun[${hh}u / 4u][${hh}u % 4u], lt[$hh]);
        }
//!end
    }
//!repeat hh G_TILE
    if (${hh}u < ng) {
        workgroupBarrier();            // sp's previous contents are read
        if (pv_on) {
            let a = acc[$hh];
            let at = (pv_part * D4 + pv_d4) * 4u;
            sp[at] = a.x;
            sp[at + 1u] = a.y;
            sp[at + 2u] = a.z;
            sp[at + 3u] = a.w;
        }
        workgroupBarrier();
        for (var i = t; i < D; i += WG) {
            var s: f32 = 0.0;
            for (var p: u32 = 0u; p < NPART; p++) {
                s += sp[p * D + i];
            }
            store_acc(${hh}u, i, s, lt[$hh]);
        }
    }
//!end
