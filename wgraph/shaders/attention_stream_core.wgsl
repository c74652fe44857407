// The streaming core: one workgroup attends one (query i, q head h) over keys [lo, hi). Threads split each
// chunk of WORKGROUP_SIZE keys (one score each) and reduce max and sum with a tree in workgroup memory;
// they split the head dims for the V accumulation. Returns (m, l); acc holds the unnormalised output dims
// t, t + WG, ... Needs attention_params.wgsl, attention_kv.wgsl and the defines WORKGROUP_SIZE, MAX_HEAD_DIM.
const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D: u32 = {{MAX_HEAD_DIM}}u;
const DIMS_PER_THREAD: u32 = (MAX_D + WG - 1u) / WG;

var<workgroup> red: array<f32, {{WORKGROUP_SIZE_X}}>;
var<workgroup> probs: array<f32, {{WORKGROUP_SIZE_X}}>;

// Tree reduction of red[0..WG) into red[0]; op 0 = max, 1 = sum. Ends with a barrier, so all threads
// may read red[0] afterwards.
fn tree_reduce(t: u32, op: u32) {
    for (var stride: u32 = WG / 2u; stride > 0u; stride = stride / 2u) {
        workgroupBarrier();
        if (t < stride) {
            if (op == 0u) {
                red[t] = max(red[t], red[t + stride]);
            } else {
                red[t] = red[t] + red[t + stride];
            }
        }
    }
    workgroupBarrier();
}

fn attend_range(i: u32, h: u32, t: u32, lo: u32, hi: u32,
                acc: ptr<function, array<f32, DIMS_PER_THREAD>>) -> vec2<f32> {
    let g = kv_head_of(h);
    let D = params.head_dim;
    var m: f32 = MASKED;
    var l: f32 = 0.0;
    for (var base: u32 = lo; base < hi; base += WG) {
        let j = base + t;
        var s: f32 = MASKED;
        if (j < hi) {
            s = score_global(i, h, j);
        }
        red[t] = s;
        tree_reduce(t, 0u);
        let m_new = max(m, red[0]);   // key `base` is always visible, so red[0] is a real score
        let corr = exp(m - m_new);
        var p: f32 = 0.0;
        if (j < hi) {
            p = exp(s - m_new);
        }
        workgroupBarrier();           // everyone has read red[0]
        red[t] = p;
        probs[t] = p;
        tree_reduce(t, 1u);
        l = l * corr + red[0];
        m = m_new;
        let n_keys = min(WG, hi - base);
        for (var n: u32 = 0u; n < DIMS_PER_THREAD; n++) {
            let d = t + n * WG;
            if (d < D) {
                var a = (*acc)[n] * corr;
                for (var kk: u32 = 0u; kk < n_keys; kk++) {
                    a += probs[kk] * kv_v1(kv_index(kv_row(base + kk), g, d));
                }
                (*acc)[n] = a;
            }
        }
        workgroupBarrier();           // probs and red are rewritten by the next chunk
    }
    return vec2<f32>(m, l);
}
