// Subgroup decode: one workgroup per (query, q head). Each subgroup takes every nsg-th visible key; its
// lanes split the head dims, the q.k dot is one subgroupAdd, and each subgroup keeps its own online
// softmax. The subgroups' (m, l, acc) are merged in workgroup memory at the end. Subgroup ids are
// handed out with an atomic (WGSL does not promise which invocations form a subgroup), and lane counts
// come from subgroupAdd, so any subgroup size from 4 up works. Dispatch: (seq_len, num_heads, 1).
{{ENABLE_F16}}
// No `enable subgroups;`: Naga (wgpu-native) rejects it and takes the subgroup feature from the device.
//!include attention_params.wgsl
//!include attention_kv.wgsl
@group(0) @binding(6) var<storage, read_write> out: array<{{OUT_T}}>;
@group(0) @binding(10) var<storage, read_write> lse: array<f32>;   // [Hq, S]; a 4-byte fallback unless write_lse

const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D: u32 = {{MAX_HEAD_DIM}}u;
const MIN_SUBGROUP: u32 = 4u;                    // WebGPU's smallest subgroup size
const MAX_SUBGROUPS: u32 = {{WORKGROUP_SIZE_X}}u / 4u;
const DIMS_PER_LANE: u32 = (MAX_D + MIN_SUBGROUP - 1u) / MIN_SUBGROUP;

var<workgroup> sg_counter: atomic<u32>;
var<workgroup> sg_m: array<f32, MAX_SUBGROUPS>;
var<workgroup> sg_l: array<f32, MAX_SUBGROUPS>;
var<workgroup> acc_total: array<f32, MAX_D>;

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
    let i = wid.x;
    let h = wid.y;
    let g = kv_head_of(h);
    let D = params.head_dim;
    let kv_len = kv_len_now();
    let range = key_range(query_pos(i, kv_len), kv_len);

    // Workgroup memory is not zeroed on lavapipe through wgpu-native (docs/lavapipe.md): reset the counter.
    if (t == 0u) {
        atomicStore(&sg_counter, 0u);
    }
    for (var d: u32 = t; d < MAX_D; d += WG) {
        acc_total[d] = 0.0;
    }
    workgroupBarrier();
    let lanes = subgroupAdd(1u);                 // active lanes (a subgroup may be wider than WG)
    var my_id: u32 = 0u;
    if (lane == 0u) {
        my_id = atomicAdd(&sg_counter, 1u);
    }
    let sg = subgroupMax(my_id);
    workgroupBarrier();
    let nsg = atomicLoad(&sg_counter);

    var qv: array<f32, DIMS_PER_LANE>;
    var acc: array<f32, DIMS_PER_LANE>;
    let qb = q_index(i, h, 0u);
    for (var n: u32 = 0u; n < DIMS_PER_LANE; n++) {
        let d = lane + n * lanes;
        if (d < D) {
            qv[n] = f32(q[qb + d]);
        }
    }
    var m: f32 = MASKED;
    var l: f32 = 0.0;
    for (var j: u32 = range.x + sg; j < range.y; j += nsg) {
        let kb = kv_index(kv_row(j), g, 0u);
        var part: f32 = 0.0;
        for (var n: u32 = 0u; n < DIMS_PER_LANE; n++) {
            let d = lane + n * lanes;
            if (d < D) {
                part += qv[n] * kv_k1(kb + d);
            }
        }
        let s = transform_score(subgroupAdd(part));
        let m_new = max(m, s);
        let corr = exp(m - m_new);
        let p = exp(s - m_new);
        l = l * corr + p;
        for (var n: u32 = 0u; n < DIMS_PER_LANE; n++) {
            let d = lane + n * lanes;
            if (d < D) {
                acc[n] = acc[n] * corr + p * kv_v1(kb + d);
            }
        }
        m = m_new;
    }

    if (lane == 0u) {
        sg_m[sg] = m;
        sg_l[sg] = l;
    }
    workgroupBarrier();
    var mm: f32 = MASKED;
    for (var s: u32 = 0u; s < nsg; s++) {
        if (sg_l[s] > 0.0) {
            mm = max(mm, sg_m[s]);
        }
    }
    var ll: f32 = 0.0;
    for (var s: u32 = 0u; s < nsg; s++) {
        if (sg_l[s] > 0.0) {
            ll += exp(sg_m[s] - mm) * sg_l[s];
        }
    }
    // a subgroup that saw a NaN score (a NaN q or k) has l NaN, which `> 0.0` skipped: its acc (NaN) still made
    // the output NaN through w * acc, but the lse came out finite, or -inf when every subgroup saw it; NaN in,
    // NaN out for the lse too (docs/errors.md). Tested on the bits, as any NaN test here.
    for (var s: u32 = 0u; s < nsg; s++) {
        if (is_nan_f32(sg_l[s])) {
            ll = sg_l[s];
        }
    }
    // Merge the subgroups' accumulators one subgroup per round (no float atomics in WGSL); the loop runs
    // over the constant MAX_SUBGROUPS so its barriers sit in uniform control flow.
    var w: f32 = 0.0;
    if (l > 0.0) {
        w = exp(m - mm);
    }
    for (var s: u32 = 0u; s < MAX_SUBGROUPS; s++) {
        if (s == sg) {
            for (var n: u32 = 0u; n < DIMS_PER_LANE; n++) {
                let d = lane + n * lanes;
                if (d < D) {
                    acc_total[d] += w * acc[n];
                }
            }
        }
        workgroupBarrier();
    }
    var inv_l: f32 = 0.0;
    if (ll > 0.0) {
        inv_l = 1.0 / ll;                         // a row with every key masked stays 0, never NaN
    }
    if (is_nan_f32(ll)) {
        inv_l = ll;                               // NaN in, NaN out, not through 0 * NaN alone
    }
    for (var d: u32 = t; d < D; d += WG) {
        out[q_index(i, h, d)] = {{OUT_T}}(acc_total[d] * inv_l);
    }
    if (params.write_lse != 0u && t == 0u) {
        lse[h * params.seq_len + i] = lse_of(mm, ll);
    }
}
