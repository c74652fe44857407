// kv_quantize's packed format, read by kv_dequantize.wgsl, tiered_quant.wgsl and bdpa_decode.wgsl (included): VALS_PER_WORD signed
// BITS-bit values per u32, value k at bits [BITS * k, BITS * (k + 1)).
const BITS: u32 = {{BITS}}u;
const VALS_PER_WORD: u32 = {{VALS_PER_WORD}}u;

// Value d of a packed row (unscaled), from that row's word d / VALS_PER_WORD.
fn unpack_value(word: u32, d: u32) -> f32 {
    return f32(extractBits(bitcast<i32>(word), BITS * (d % VALS_PER_WORD), BITS));
}
