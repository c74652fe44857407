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
    // Touches (an experiment): each lane of a slot also reads one word of a K or V line TOUCH steps ahead of the
    // step's loads (lane -> K/V, key u, 128-byte line), so those lines are on their way to L2 while the registers
    // hold one step; a touch is used (OR'd into `sink`) TOUCH_RING steps after it is issued, not in its own step.
    let tlines = max(1u, (D / ELEMS) / 8u);
    let tsel = lane % (2u * U * tlines);
    let tkv = tsel % 2u;
    let tu = (tsel / 2u) % U;
    let tpiece = col - lane + min((tsel / (2u * U)) * 8u, D / ELEMS - 1u);
    var sink = 0u;
//!repeat T TOUCH_RING
    var tk$T = 0u;
//!end
    var kb: u32 = 0u;
    loop {
//!repeat T TOUCH_RING
        if (kb >= n) {
            break;
        }
        sink = sink | tk$T;
        {
            let tr = kv_row(lo + min(kb + TOUCH * KS * U + tu * KS + slot, n - 1u)) * row_stride + tpiece;
            if (tkv == 0u) {
                tk$T = k[tr].x;
            } else {
                tk$T = v[tr].x;
            }
        }
        {
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
                d += dot(qr[(${hh}u * PPL + ${p}u) * PV4 + ${e}u], piece(kc[${u}u * PPL + ${p}u], ${e}u));
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
        kb += KS * U;
//!end
    }
//!repeat T TOUCH_RING
    sink = sink | tk$T;
//!end
    m[0] = m[0] + select(0.0, f32(sink & 1u), params.num_kv_heads == 0xffffffffu);  // never: keeps the touches
