// The decode loop shared by tiered_*.wgsl and bdpa_*.wgsl (included, not a variant).
// One workgroup per (q head, query): threads score one key each per tile of WG keys, the tile's max and
// probabilities go through workgroup memory (2 barriers per tile, none per key), and each thread owns the
// output dims d = tid, tid + WG, ... with an online softmax across tiles. No kv-length ceiling.
// It declares the bindings it reads and writes itself (1-3: q, out, len_buf). The including file provides the
// rest (from binding 4), params (num_heads, num_kv_heads, head_dim, kv_len, use_len_buf, len_cap, scale, softcap,
// write_lse), the device-error site LEN_ERROR_SITE of a GPU kv_len above len_cap, and
// fn prepare(n), query_pos(i, n), key_range(qpos, n), key_masked(j, qpos), key_dot(j, kvh) (dot of q_sh with
// key j) and value(j, kvh, d).

@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
@group(0) @binding(2) var<storage, read_write> out: array<{{OUT_T}}>;
@group(0) @binding(3) var<storage, read> len_buf: array<u32>;
//!include device_errors.wgsl
//!include tanh_safe.wgsl
//!include attention_nan.wgsl
@group(0) @binding(12) var<storage, read_write> lse: array<f32>;   // [Hq, S]; a 4-byte fallback unless write_lse

const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const ACC_N: u32 = ({{MAX_HEAD_DIM}}u + WG - 1u) / WG;
// A masked key's score and the running max before any key: f32's lowest finite value, so a visible score is
// never below it (a marker of -1e30 took every visible score below -5e29, a large negative scale's, for masked:
// zeros and lse -inf). A key's visibility is its thread's own test, never its score.
const NEG: f32 = -3.4028234663852886e38;

var<workgroup> q_sh: array<f32, {{MAX_HEAD_DIM}}>;
var<workgroup> s_sh: array<f32, {{WORKGROUP_SIZE_X}}>;
var<workgroup> p_sh: array<f32, {{WORKGROUP_SIZE_X}}>;
var<workgroup> n_sh: u32;

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let h = wid.x;
    let i = wid.y;
    let D = params.head_dim;
    let kvh = h / (params.num_heads / params.num_kv_heads);
    if (tid == 0u) {
        var n = params.kv_len;
        if (params.use_len_buf != 0u) {
            n = len_buf[0];
            if (n > params.len_cap) {   // keys past the storage: clamp (no read out of bounds) and report
                report_error(LEN_ERROR_SITE, n, params.len_cap);
                n = params.len_cap;
            }
        }
        n_sh = n;
    }
    let n = workgroupUniformLoad(&n_sh);
    prepare(n);
    let qbase = (i * params.num_heads + h) * D;
    for (var d = tid; d < D; d = d + WG) {
        q_sh[d] = f32(q[qbase + d]);
    }
    workgroupBarrier();
    let qpos = query_pos(i, n);
    let range = key_range(qpos, n);
    var m = NEG;
    var l = 0.0;
    var acc: array<f32, ACC_N>;
    for (var t0 = range.x; t0 < range.y; t0 = t0 + WG) {
        let j = t0 + tid;
        var s = NEG;
        let seen = j < range.y && !key_masked(j, qpos);
        if (seen) {
            s = key_dot(j, kvh) * params.scale;
            if (params.softcap > 0.0) {
                s = params.softcap * tanh_safe(s / params.softcap);
            }
        }
        s_sh[tid] = s;
        workgroupBarrier();
        var m_new = m;
        for (var k = 0u; k < WG; k = k + 1u) {
            m_new = max(m_new, s_sh[k]);
        }
        var p = 0.0;
        if (seen) {   // a NaN score (a NaN in q or k) reaches the row as NaN
            p = exp(s - m_new);
        }
        p_sh[tid] = p;
        workgroupBarrier();
        let alpha = exp(m - m_new);
        l = l * alpha;
        for (var a = 0u; a < ACC_N; a = a + 1u) {
            acc[a] = acc[a] * alpha;
        }
        let cnt = min(WG, range.y - t0);
        for (var k = 0u; k < cnt; k = k + 1u) {
            let pk = p_sh[k];
            if (pk > 0.0 || is_nan_f32(pk)) {
                l = l + pk;
                for (var a = 0u; a < ACC_N; a = a + 1u) {
                    let d = tid + a * WG;
                    if (d < D) {
                        acc[a] = acc[a] + pk * value(t0 + k, kvh, d);
                    }
                }
            }
        }
        m = m_new;
    }
    var inv_l = 0.0;
    if (l > 0.0) {
        inv_l = 1.0 / l;
    }
    // l is NaN once a seen score was (a NaN q or k: NVIDIA's max() drops it from m, exp(NaN - m) keeps it): NaN
    // in, NaN out, for the output without relying on 0 * NaN and for the lse, where `l > 0` gave -inf
    if (is_nan_f32(l)) {
        inv_l = l;
    }
    for (var a = 0u; a < ACC_N; a = a + 1u) {
        let d = tid + a * WG;
        if (d < D) {
            out[qbase + d] = {{OUT_T}}(acc[a] * inv_l);
        }
    }
    if (params.write_lse != 0u && tid == 0u) {
        // log-sum-exp of the visible scores; -inf (no key visible) is built from the uniform, not a literal
        var row_lse = bitcast<f32>(0xff800000u | (params.num_heads & 0u));
        if (l > 0.0) {
            row_lse = m + log(l);
        }
        if (is_nan_f32(l)) {
            row_lse = l;
        }
        lse[h * params.seq_len + i] = row_lse;
    }
}
