// The fused split-K decode's stores and its end (attention_decode_fused.wgsl, attention_batched_fused.wgsl): each
// chunk stores its merged (m, l) and weighted acc per head of its block as partials, then counts itself on the
// block's device counter (binding sync_counters, wgraph/sync_counters.py), and the chunk that finishes last merges
// every chunk's partials into out and lse, as the split-K combine passes (attention_decode_splitk_combine.wgsl,
// attention_batched_combine.wgsl) do in a dispatch of their own: one dispatch a call instead of two (a dependent
// dispatch costs ~2-3 us on the H200 and that pass 4.0-4.8 us, h200-decode-split.log). The partials are stored and
// loaded as atomics, which every workgroup sees coherently (a plain load may be served by an L1 cache holding a
// line from before the other chunk's store), and storageBarrier() (device scope in SPIR-V) orders a chunk's stores
// before its count and the last chunk's loads after it. The last chunk also sets its counter back to 0, so every
// counter is 0 between dispatches. The kernel declares out, lse, part_ml and part_acc (array<atomic<u32>>: f32
// bits) and sync_counters, defines out_at(h, d) and lse_at(h) (where q head h's output dim d and lse go) and sets
// part_first, the partial slot of the block's first head's first chunk (head hh's chunk c: part_first + hh *
// num_chunks + c). Needs WG, G_TILE, MAX_CHUNKS (the most chunks a plan gives a call: the registry's limit
// max_chunks), red (attention_fused_consts.wgsl), lse_of and is_nan_f32.
const MAX_CHUNKS: u32 = {{MAX_CHUNKS}}u;
const_assert 2u * G_TILE * MAX_CHUNKS <= RED_N;   // every (m, l) of a block's chunks fits red at once

var<private> part_first: u32;                     // the partial slot of the block's first head's first chunk
var<private> part_slot: u32;                      // part_first + this chunk
var<workgroup> last_chunk: u32;
var<workgroup> heads_ml: array<vec2<f32>, G_TILE>;   // the merged (max, sum) of each head of the block

fn store_ml(hh: u32, m: f32, l: f32) {
    let at = (part_slot + hh * params.num_chunks) * 2u;
    atomicStore(&part_ml[at], bitcast<u32>(m));
    atomicStore(&part_ml[at + 1u], bitcast<u32>(l));
}

fn store_acc(hh: u32, d: u32, sum: f32, l: f32) {
    atomicStore(&part_acc[(part_slot + hh * params.num_chunks) * params.head_dim + d], bitcast<u32>(sum));
}

fn acc_at(i: u32) -> f32 {
    return bitcast<f32>(atomicLoad(&part_acc[i]));
}

// The output of a sum over weights l: zeros where no key was seen (l == 0), NaN in, NaN out (docs/errors.md), as
// the combine passes write it.
fn out_value(sum: f32, l: f32) -> f32 {
    var inv_l: f32 = 0.0;
    if (l > 0.0) {
        inv_l = 1.0 / l;
    }
    if (is_nan_f32(l)) {
        inv_l = l;
    }
    return sum * inv_l;
}

// No key is visible (no chunk at all): zeros for the ng heads from h0, and lse -inf (thread t of WG).
fn store_no_keys(t: u32, h0: u32, ng: u32) {
    for (var i = t; i < ng * params.head_dim; i += WG) {
        out[out_at(h0 + i / params.head_dim, i % params.head_dim)] = {{Q_T}}(0.0);
    }
    if (params.write_lse != 0u && t < ng) {
        lse[lse_at(h0 + t)] = lse_of(MASKED, 0.0);
    }
}

// Thread t of a chunk whose partials are stored: count the chunk on counter `block`; the last of the block's nc
// chunks merges them all (the ng heads from h0). Called by every thread, in uniform control flow.
fn finish_chunk(t: u32, h0: u32, ng: u32, nc: u32, block: u32) {
    storageBarrier();                             // this chunk's partials are stored before it counts
    if (t == 0u) {
        let done = atomicAdd(&sync_counters[block], 1u) + 1u;
        if (done == nc) {
            atomicStore(&sync_counters[block], 0u);   // every chunk has counted: 0 for the next call
        }
        last_chunk = u32(done == nc);
    }
    if (workgroupUniformLoad(&last_chunk) == 0u) {
        return;
    }
    storageBarrier();                             // the other chunks' partials are loaded after their counts
    let D = params.head_dim;
    // (m, l) of head hh's chunk c at red[(hh * nc + c) * 2 ..]
    for (var i = t; i < ng * nc; i += WG) {
        let at = (part_first + (i / nc) * params.num_chunks + i % nc) * 2u;
        red[2u * i] = bitcast<f32>(atomicLoad(&part_ml[at]));
        red[2u * i + 1u] = bitcast<f32>(atomicLoad(&part_ml[at + 1u]));
    }
    workgroupBarrier();
    if (t < ng) {                                 // each head's (max, sum), merged as the combine merges states
        var st = vec2<f32>(MASKED, 0.0);
        for (var c = 0u; c < nc; c++) {
            let x = vec2<f32>(red[2u * (t * nc + c)], red[2u * (t * nc + c) + 1u]);
            let m = max(st.x, x.x);
            st = vec2<f32>(m, st.y * exp(st.x - m) + x.y * exp(x.x - m));
        }
        heads_ml[t] = st;
    }
    workgroupBarrier();
    for (var i = t; i < ng * nc; i += WG) {       // each chunk's weight exp(m_c - max) in place of its m
        red[2u * i] = exp(red[2u * i] - heads_ml[i / nc].x);
    }
    workgroupBarrier();
    for (var i = t; i < ng * D; i += WG) {
        let hh = i / D;
        let base = (part_first + hh * params.num_chunks) * D + i % D;
        let w0 = hh * nc;
        var sum: f32 = 0.0;
        var c = 0u;
        for (; c + 4u <= nc; c += 4u) {           // four loads in flight before their sums
            let a0 = acc_at(base + c * D);
            let a1 = acc_at(base + (c + 1u) * D);
            let a2 = acc_at(base + (c + 2u) * D);
            let a3 = acc_at(base + (c + 3u) * D);
            sum += red[2u * (w0 + c)] * a0 + red[2u * (w0 + c + 1u)] * a1 + red[2u * (w0 + c + 2u)] * a2
                + red[2u * (w0 + c + 3u)] * a3;
        }
        for (; c < nc; c++) {
            sum += red[2u * (w0 + c)] * acc_at(base + c * D);
        }
        out[out_at(h0 + hh, i % D)] = {{Q_T}}(out_value(sum, heads_ml[hh].y));
    }
    if (params.write_lse != 0u && t < ng) {
        lse[lse_at(h0 + t)] = lse_of(heads_ml[t].x, heads_ml[t].y);
    }
}
