    let groups = WG / D4;
    let d4 = t % D4;
    let grp = t / D4;
    // the thread's first UNROLL chunks' m and acc loaded before the chunks' max is known, so the weighted sum waits
    // for one memory round trip, not two (the combine pass alone takes ~5 us a call; the same sums in the same
    // order, bit-equal: h100-decode-combine-prefetch-1206.log, 1-8% less time a decode call)
    var pm: array<f32, UNROLL>;
    var pa: array<vec4<f32>, UNROLL>;
//!repeat u UNROLL
    pm[$u] = MASKED;
    pa[$u] = vec4<f32>(0.0);
    if (grp < groups && grp + ${u}u * groups < n) {
        pm[$u] = part_ml[(first + grp + ${u}u * groups) * 2u];
        pa[$u] = part_acc[(first + grp + ${u}u * groups) * D4 + d4];
    }
//!end
    var st = vec2<f32>(MASKED, 0.0);              // the thread's chunks' (m, l), merged as they are read
    for (var c: u32 = t; c < n; c += WG) {
        st = merge_ml(st, vec2<f32>(part_ml[(first + c) * 2u], part_ml[(first + c) * 2u + 1u]));
    }
    let ml = reduce_ml(t, st);
    let m = ml.x;
    let l = ml.y;
    var inv_l: f32 = 0.0;
    if (l > 0.0) {
        inv_l = 1.0 / l;                          // l == 0 (no chunk): zeros
    }
    if (is_nan_f32(l)) {
        inv_l = l;                                // NaN in, NaN out (docs/errors.md)
    }

    var acc = vec4<f32>(0.0);
    if (grp < groups) {
//!repeat u UNROLL
        if (grp + ${u}u * groups < n) {
            acc += exp(pm[$u] - m) * pa[$u];
        }
//!end
        for (var c0: u32 = grp + groups * UNROLL; c0 < n; c0 += groups * UNROLL) {
//!repeat u UNROLL
            {
                let c = c0 + ${u}u * groups;
                if (c < n) {
                    acc += exp(part_ml[(first + c) * 2u] - m) * part_acc[(first + c) * D4 + d4];
                }
            }
//!end
        }
    }
    sums[t] = acc;
    workgroupBarrier();