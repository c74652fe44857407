        r_lo[$r] = rr.x;
        r_hi[$r] = rr.y;
        m[$r] = MASKED;
        l[$r] = 0.0;
        poisoned[$r] = false;
        poison[$r] = 0.0;
//!repeat n DPT4
        {
            let d4 = part + ${n}u * TPQ;
            var x = vec4<f32>(0.0);
            if (ok[$r] && d4 < D4) {
                x = vec4<f32>(q[ob[$r] + d4]);
            }
            qr[${r}u * DPT4 + ${n}u] = x;
            o[${r}u * DPT4 + ${n}u] = vec4<f32>(0.0);
        }
//!end