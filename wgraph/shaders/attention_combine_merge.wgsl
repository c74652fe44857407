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

    let groups = WG / D4;
    let d4 = t % D4;
    let grp = t / D4;
    var acc = vec4<f32>(0.0);
    if (grp < groups) {
        for (var c0: u32 = grp; c0 < n; c0 += groups * UNROLL) {
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