//!include tanh_small.wgsl

// tanh accurate near 0 (a large softcap's scores sit there) that cannot produce inf/inf: tanh(15) == 1 in f32.
// A NaN score stays NaN (clamp(NaN) gave +-15 on lavapipe, so a softcap dropped a NaN of q or k); is_nan_f32 is
// is_nan.wgsl's, which every includer has through attention_nan.wgsl.
fn tanh_safe(x: f32) -> f32 {
    if (abs(x) < 0.625 || is_nan_f32(x)) {
        return tanh_small(x);
    }
    return tanh(clamp(x, -15.0, 15.0));
}
