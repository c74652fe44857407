    // 1. scores into sc[j * G_TILE + head]. Software-pipelined: a step's U loads are issued before the
    // previous step's math and reductions, so memory latency overlaps them (the kernel is latency-bound:
    // one wave of workgroups, each a chain of steps). Key indices are clamped into the chunk rather than
    // guarded, so no branch stands between the loads (a clamped key's dots are never summed; the loads
    // past the last step re-read row n - 1).
    var w: array<vec4<u32>, U>;
//!repeat u U
    w[$u] = k[kv_row(lo + min(${u}u * KS + slot, n - 1u)) * row_stride + g * LPR + lane];
//!end
    for (var kb: u32 = 0u; kb < n; kb += KS * U) {
        let cur = w;
//!repeat u U
        w[$u] = k[kv_row(lo + min(kb + KS * U + ${u}u * KS + slot, n - 1u)) * row_stride + g * LPR + lane];
//!end
        if (in_slot) {
//!repeat u U
//!repeat hh G_TILE
            {
                var d: f32 = 0.0;
//!repeat e PV4
                d += dot(qr[${hh}u * PV4 + ${e}u], piece(cur[$u], ${e}u));
//!end
                red[lane * pstride + (${u}u * KS + slot) * G_TILE + ${hh}u] = d;   // pair (key, head)
            }
//!end
//!end
        }
        workgroupBarrier();
        for (var p: u32 = t; p < pairs; p += WG) {
            let j = kb + p / G_TILE;
            if (j < n) {
                var s: f32 = 0.0;
                for (var l: u32 = 0u; l < LPR; l++) {
                    s += red[l * pstride + p];
                }
                sc[j * G_TILE + p % G_TILE] = transform_score(s);
            }
        }
        workgroupBarrier();                      // red is rewritten by the next step; sc is complete after the last
    }

    // The first p.V step's V loads, in flight during the softmax.
//!repeat u U
    w[$u] = v[kv_row(lo + min(${u}u * KS + slot, n - 1u)) * row_stride + g * LPR + lane];
//!end

    // 2. softmax over the chunk, per head. Thread t serves head t % G_TILE, keys t / G_TILE + i * (WG / G_TILE).
    let hh_t = t % G_TILE;
    var mx: f32 = MASKED;
    for (var j: u32 = t / G_TILE; j < n; j += WG / G_TILE) {
        mx = max(mx, sc[j * G_TILE + hh_t]);
    }
    red[t] = mx;
    workgroupBarrier();
    if (t < G_TILE) {
        var m: f32 = MASKED;
        for (var i: u32 = t; i < WG; i += G_TILE) {
            m = max(m, red[i]);
        }
        stat[t] = m;
    }
    workgroupBarrier();
    let m_t = stat[hh_t];
    var lsum: f32 = 0.0;
    for (var j: u32 = t / G_TILE; j < n; j += WG / G_TILE) {
        let p = exp(sc[j * G_TILE + hh_t] - m_t);   // a NaN score stays NaN: its row's output is NaN
        sc[j * G_TILE + hh_t] = p;
        lsum += p;
    }
    red[t] = lsum;                               // the maxima in red were read before stat's barrier
    workgroupBarrier();                          // p in sc and the sums in red are complete
    if (t < G_TILE) {
        var l: f32 = 0.0;
        for (var i: u32 = t; i < WG; i += G_TILE) {
            l += red[i];
        }
        stat[G_TILE + t] = l;
    }

    // 3. p.V in registers: acc[head * PV4 + e] holds dims lane * ELEMS + 4e .. + 3 of that head.
    var acc: array<vec4<f32>, G_TILE * PV4>;
//!repeat i G_TILE * PV4
    acc[$i] = vec4<f32>(0.0);
//!end
    if (in_slot) {
        for (var kb: u32 = 0u; kb < n; kb += KS * U) {
            let cur = w;                         // pipelined as in step 1
//!repeat u U
            w[$u] = v[kv_row(lo + min(kb + KS * U + ${u}u * KS + slot, n - 1u)) * row_stride + g * LPR + lane];
//!end
//!repeat u U
            {
                let j = min(kb + ${u}u * KS + slot, n - 1u);
                let valid = kb + ${u}u * KS + slot < n;
//!repeat e PV4
                {
                    let x = select(vec4<f32>(0.0), piece(cur[$u], ${e}u), valid);   // a clamped key adds nothing
//!repeat hh G_TILE
                    acc[${hh}u * PV4 + ${e}u] += sc[j * G_TILE + ${hh}u] * x;
//!end
                }
//!end
            }
//!end
        }
    }