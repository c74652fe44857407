//!include tanh_small.wgsl

// tanh accurate near 0 (a large softcap's scores sit there) that cannot produce inf/inf: tanh(15) == 1 in f32.
fn tanh_safe(x: f32) -> f32 {
    if (abs(x) < 0.625) {
        return tanh_small(x);
    }
    return tanh(clamp(x, -15.0, 15.0));
}