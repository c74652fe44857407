// BDPA decode: key/value j = basis[b] + residual[r] (int8, one f16 scale per (residual row, kv head, k|v)),
// with (b, r, pos) = index[j]; RoPE (half split) is applied to the key here from rope[pos] = (cos, sin) tables,
// and masking uses the original position pos. q (already rotated at its own position) and out are f32.
enable f16;

struct BDPAParams {
    num_heads: u32,
    num_kv_heads: u32,
    head_dim: u32,
    seq_len: u32,
    kv_len: u32,
    use_len_buf: u32,
    len_cap: u32,          // the index's rows: a GPU kv_len above it is clamped and reported
    q_pos: u32,
    causal: u32,
    sliding_window: u32,
    scale: f32,
    softcap: f32,
    window_right: i32,   // -1: off; else key masked when its original position > q_pos + window_right
    write_lse: u32,      // 1: write lse [Hq, 1] (tiered_loop.wgsl)
}

@group(0) @binding(0) var<uniform> params: BDPAParams;
const LEN_ERROR_SITE: u32 = ERR_BDPA_KV_LEN;
// q, out and len_buf (bindings 1-3) are declared by tiered_loop.wgsl.
// [num_basis, 2, kv_heads, head_dim]: K basis then V basis of each token id.
@group(0) @binding(4) var<storage, read> basis: array<f16>;
// [num_residuals, 2, kv_heads, head_dim / 4] int8 x4 per u32 (kv_quantize's int8 format: BITS 8, VALS_PER_WORD 4).
@group(0) @binding(5) var<storage, read> residual: array<u32>;
// [num_residuals, 2, kv_heads]
@group(0) @binding(6) var<storage, read> residual_scale: array<f16>;
// [kv_len, 3]: basis id, residual id, original position.
@group(0) @binding(7) var<storage, read> index: array<u32>;
// [rope_len, 2, head_dim / 2]: cos then sin at each position.
@group(0) @binding(8) var<storage, read> rope: array<f32>;

//!include kv_unpack.wgsl

fn prepare(n: u32) {
}

fn query_pos(i: u32, n: u32) -> i32 {
    return i32(params.q_pos + i);
}

fn key_range(qpos: i32, n: u32) -> vec2<u32> {
    return vec2<u32>(0u, n);
}

fn key_masked(j: u32, qpos: i32) -> bool {
    // The index is a GPU tensor: a basis id, residual id or position past its table (robust access would read
    // some other row, silently) is reported and its key skipped like a masked one, so nothing reads it.
    let H = params.num_kv_heads;
    let D = params.head_dim;
    let b = index[3u * j];
    let nb = arrayLength(&basis) / (2u * H * D);
    if (b >= nb) {
        report_error(ERR_BDPA_BASIS, b, nb);
        return true;
    }
    let r = index[3u * j + 1u];
    let nr = arrayLength(&residual) / (2u * H * (D / VALS_PER_WORD));
    if (r >= nr) {
        report_error(ERR_BDPA_RESIDUAL, r, nr);
        return true;
    }
    let pu = index[3u * j + 2u];
    let np = arrayLength(&rope) / D;   // [positions, 2, D / 2]
    if (pu >= np) {
        report_error(ERR_BDPA_POSITION, pu, np);
        return true;
    }
    let p = i32(pu);   // < the table's rows, far below 2^31
    if (params.causal != 0u && p > qpos) {
        return true;
    }
    // p - qpos > window_right, compared as u32 like the window below
    if (params.window_right >= 0 && p > qpos && u32(p - qpos) > u32(params.window_right)) {
        return true;
    }
    // qpos - p >= window, compared as u32 (a window >= 2^31 is no i32)
    return params.sliding_window > 0u && qpos >= p && u32(qpos - p) >= params.sliding_window;
}

// Component d of K (part 0) or V (part 1) of key j, before RoPE.
fn kv_component(j: u32, part: u32, kvh: u32, d: u32) -> f32 {
    let H = params.num_kv_heads;
    let D = params.head_dim;
    let b = index[3u * j];
    let r = index[3u * j + 1u];
    let rh = (r * 2u + part) * H + kvh;
    let word = residual[rh * (D / VALS_PER_WORD) + d / VALS_PER_WORD];
    let res = unpack_value(word, d) * f32(residual_scale[rh]);
    return f32(basis[((b * 2u + part) * H + kvh) * D + d]) + res;
}

fn key_dot(j: u32, kvh: u32) -> f32 {
    let half = params.head_dim / 2u;
    let p = index[3u * j + 2u];
    let rbase = p * 2u * half;
    var s = 0.0;
    for (var d = 0u; d < half; d = d + 1u) {
        let x1 = kv_component(j, 0u, kvh, d);
        let x2 = kv_component(j, 0u, kvh, d + half);
        let c = rope[rbase + d];
        let sn = rope[rbase + half + d];
        s = s + q_sh[d] * (x1 * c - x2 * sn) + q_sh[d + half] * (x2 * c + x1 * sn);
    }
    return s;
}

fn value(j: u32, kvh: u32, d: u32) -> f32 {
    return kv_component(j, 1u, kvh, d);
}

//!include tiered_loop.wgsl
