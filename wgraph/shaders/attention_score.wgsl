//!include tanh_safe.wgsl

// Soft-capped scores or not, compiled in (docs/kernels.md): every score of a loop goes through here, and as a
// uniform test NVIDIA's compiler predicated the tanh on for every score, capped or not.
override SOFTCAP: bool;

fn transform_score(dot_qk: f32) -> f32 {
    var s = dot_qk * params.scale;
    if (SOFTCAP) {
        s = params.softcap * tanh_safe(s / params.softcap);
    }
    return s;
}

// The natural-log log-sum-exp of a row from its softmax state (max m, sum l of exp(s - m)): -inf for a row
// that sees no key (WGSL has no infinite literal; the uniform keeps it out of constant evaluation), NaN in
// NaN out.
fn lse_of(m: f32, l: f32) -> f32 {
    if (is_nan_f32(m) || is_nan_f32(l)) {
        return select(l, m, is_nan_f32(m));
    }
    if (l > 0.0) {
        return m + log(l);
    }
    return bitcast<f32>(0xff800000u | (params.write_lse & 0u));
}