// Symmetric quantization per (row, kv head): scale = max|x| / QMAX rounded up to f16 (so |x| / scale <= QMAX and
// no value clamps), q = round(x / scale), VALS_PER_WORD signed BITS-bit values packed little-end-first per u32.
// Rows go to position pos + r of a contiguous, ring or paged packed cache (same addressing as kv_append).
enable f16;

struct KVQuantizeParams {
    n_rows: u32,
    kv_heads: u32,
    head_dim: u32,
//!include kv_common_fields.wgsl
}

@group(0) @binding(0) var<uniform> params: KVQuantizeParams;
@group(0) @binding(1) var<storage, read> src: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> packed: array<u32>;
@group(0) @binding(3) var<storage, read_write> scales: array<f16>;
@group(0) @binding(4) var<storage, read> page_table: array<u32>;
@group(0) @binding(5) var<storage, read> pos_buf: array<u32>;

//!include kv_common.wgsl
//!include is_nan.wgsl
const KV_ERROR_SITE: u32 = ERR_KV_QUANTIZE_POS;
const KV_PAGE_ERROR_SITE: u32 = ERR_KV_QUANTIZE_PAGE;
const KV_RANGE_ERROR_SITE: u32 = ERR_KV_QUANTIZE_RANGE;

fn cache_rows() -> u32 {   // u32 words: head_dim / VALS_PER_WORD a (row, head)
    return arrayLength(&packed) / (params.kv_heads * (params.head_dim / {{VALS_PER_WORD}}u));
}

const BITS: u32 = {{BITS}}u;
const VALS_PER_WORD: u32 = {{VALS_PER_WORD}}u;
const QMAX: f32 = {{QMAX}}.0;

// Smallest f16 >= s (for s in f16 range), returned as f32.
fn f16_ceil(s: f32) -> f32 {
    var bits = pack2x16float(vec2<f32>(s, 0.0)) & 0xFFFFu;
    if (unpack2x16float(bits).x < s) {
        bits = bits + 1u;
    }
    return unpack2x16float(bits).x;
}

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * {{WORKGROUP_SIZE_X}}u;
    if (idx >= params.n_rows * params.kv_heads) {
        return;
    }
    let r = idx / params.kv_heads;
    let h = idx % params.kv_heads;
    let rows = kv_rows(r);
    if (rows.x == 0xFFFFFFFFu) {
        return;
    }
    let row = rows.x;
    let src_row = rows.y;
    let D = params.head_dim;
    let sbase = (src_row * params.kv_heads + h) * D;
    var amax = 0.0;
    var has_nan = false;
    for (var d = 0u; d < D; d = d + 1u) {
        let x = f32(src[sbase + d]);
        has_nan = has_nan || is_nan_f32(x);   // max() would drop it
        amax = max(amax, abs(x));
    }
    // f16 holds scales up to 65504: past it (|x| above QMAX x 65504, or inf) the scale stays there, the values
    // clip, and it is reported; a NaN makes the scale NaN, so the (row, head) reads back as NaN, never finite
    let reach = QMAX * 65504.0;
    if (amax > reach) {
        report_error(KV_RANGE_ERROR_SITE, u32(min(amax, 4294967040.0)), u32(reach));
    }
    // held at 65504 after the division too: NVIDIA divides by a reciprocal multiply (Vulkan allows 2.5 ulp), so
    // int4's 458528 / 7 is 65504.004 there, which f16_ceil rounded up to the next f16, inf (an inf scale read back
    // as NaN: q = round(x * 0) = 0 times inf)
    var scale = f16_ceil(min(min(amax, reach) / QMAX, 65504.0));
    if (has_nan) {
        scale = bitcast<f32>(0x7fc00000u | (params.n_rows & 0u));
    }
    var inv = 0.0;
    if (scale > 0.0) {
        inv = 1.0 / scale;
    }
    let words = D / VALS_PER_WORD;
    let pbase = (row * params.kv_heads + h) * words;
    let mask = (1u << BITS) - 1u;
    for (var w = 0u; w < words; w = w + 1u) {
        var word = 0u;
        for (var k = 0u; k < VALS_PER_WORD; k = k + 1u) {
            // x * inv can exceed QMAX by an ulp when |x| == amax; clamp only guards that rounding.
            let qv = i32(clamp(round(f32(src[sbase + w * VALS_PER_WORD + k]) * inv), -QMAX, QMAX));
            word = word | ((bitcast<u32>(qv) & mask) << (BITS * k));
        }
        packed[pbase + w] = word;
    }
    scales[row * params.kv_heads + h] = f16(scale);
}
