// The one-pass decode kernels' stores for attention_fused_merge.wgsl (attention_decode_single.wgsl and its batched
// twin): out = acc / l and lse as the split-K combine passes write them (l == 0, no key seen: zeros and lse -inf;
// NaN in, NaN out, docs/errors.md), and store_no_keys for a query that sees no key at all. The kernel declares
// out and lse and defines out_at(h, d) and lse_at(h): where q head h's output dim d and its lse live; main sets
// out_head, the block's first q head.
var<private> out_head: u32;

fn store_ml(hh: u32, m: f32, l: f32) {
    if (params.write_lse != 0u) {
        lse[lse_at(out_head + hh)] = lse_of(m, l);
    }
}

fn store_acc(hh: u32, d: u32, sum: f32, l: f32) {
    var inv_l: f32 = 0.0;
    if (l > 0.0) {
        inv_l = 1.0 / l;
    }
    if (is_nan_f32(l)) {
        inv_l = l;
    }
    out[out_at(out_head + hh, d)] = {{Q_T}}(sum * inv_l);
}

// Thread t of WG: zeros for the ng heads of the block, and lse -inf.
fn store_no_keys(t: u32, ng: u32) {
    for (var i = t; i < ng * params.head_dim; i += WG) {
        store_acc(i / params.head_dim, i % params.head_dim, 0.0, 0.0);
    }
    if (t == 0u) {
        for (var hh = 0u; hh < ng; hh++) {
            store_ml(hh, MASKED, 0.0);
        }
    }
}
