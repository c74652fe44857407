        var inv_l: f32 = 0.0;
        if (l[$r] > 0.0) {
            inv_l = 1.0 / l[$r];          // a row with every key masked stays 0, never NaN
        }
        if (poisoned[$r]) {
            inv_l = poison[$r];           // NaN in, NaN out (docs/errors.md)
        }
//!repeat n DPT4
        {
            let d4 = part + ${n}u * TPQ;
            if (d4 < D4) {
                out[ob[$r] + d4] = vec4<{{OUT_T}}>(o[${r}u * DPT4 + ${n}u] * inv_l);
            }
        }
//!end