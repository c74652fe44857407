// NaN test on the bits: WGSL lets a compiler assume floats are never NaN, so `x != x` may fold to false.
// Kernels whose masking compares scores (`s > MASKED_TEST` is false for NaN) use it so a NaN input reaches
// the output rows that see it instead of being dropped (docs/errors.md, "NaN and Inf").
fn is_nan_f32(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// inf and finiteness tests on the bits too: a compiler may assume no infinities and fold `x == inf`
fn is_inf_f32(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
}

fn is_finite_f32(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}
