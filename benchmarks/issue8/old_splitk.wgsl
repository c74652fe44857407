// Split-K (flash-decoding) decode, step 1. Workgroup (c, g, b) attends chunk c of the decode query's
// visible keys for q heads b * G_TILE .. of kv head g (GQA: every K/V byte is read once per kv head, not
// once per q head), and writes each head's unnormalised (m, l, acc) to part_ml / part_acc;
// attention_decode_splitk_combine.wgsl merges the chunks. Per tile of TILE_KEYS keys (two barriers per
// tile, none per key):
//   1. thread t scores key base + t for every head of the block (its K row as vec4 loads, q from
//      workgroup memory); the tile max per head is a subgroupMax (whole subgroups: no lane layout assumed)
//      folded across subgroups with an atomicMax on order-preserving u32 bits;
//   2. it writes p = exp(s - m_new) and the key's row to workgroup memory;
//   3. thread t = (slot, quad) accumulates 4 dims (quad) of p * V over keys slot, slot + nslots, ...:
//      consecutive threads read consecutive words of one V row (coalesced).
// The slots' accumulators are summed in workgroup memory once at the end. head_dim % 8 == 0.
// Dispatch: (chunks, num_kv_heads, head blocks), direct or indirect (attention_decode_splitk_prepare.wgsl).
{{ENABLE_F16}}
// No `enable subgroups;`: Naga (wgpu-native) rejects it and takes the subgroup feature from the device.
//!include attention_params.wgsl
//!include old_splitk_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
@group(0) @binding(2) var<storage, read> k: array<{{K_VEC}}>;   // 8 dims per step: see K_OCT
@group(0) @binding(3) var<storage, read> v: array<{{V_VEC}}>;   // 4 dims per word: see V_QUAD
@group(0) @binding(7) var<storage, read_write> part_ml: array<f32>;
@group(0) @binding(8) var<storage, read_write> part_acc: array<f32>;

const WG: u32 = TILE_KEYS;
const MAX_D: u32 = {{MAX_HEAD_DIM}}u;
const MAX_Q4: u32 = MAX_D / 4u;

var<workgroup> qs: array<vec4<f32>, G_TILE * MAX_Q4>;   // q of the block's heads; the output sums at the end
var<workgroup> probs: array<f32, TILE_KEYS * G_TILE>;
var<workgroup> rows: array<u32, TILE_KEYS>;
var<workgroup> tile_max: array<atomic<u32>, 2u * G_TILE>;  // two tiles' maxima: one is reset while one is read
var<workgroup> l_total: array<f32, G_TILE>;

fn unpack_quad(w: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

fn unpack_oct(w: vec4<u32>) -> mat2x4<f32> {
    return mat2x4<f32>(unpack_quad(w.xy), unpack_quad(w.zw));
}

// f32 -> u32 whose unsigned order is the float order (for atomicMax); 0 is below every float.
fn order_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn from_order_bits(u: u32) -> f32 {
    return bitcast<f32>(select(~u, u & 0x7fffffffu, (u & 0x80000000u) != 0u));
}

@compute @workgroup_size(TILE_KEYS, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
    let c = wid.x;
    let g = wid.y;
    let D = params.head_dim;
    let Q4 = D / 4u;
    let group = params.num_heads / params.num_kv_heads;
    let h0 = g * group + wid.z * G_TILE;
    let ng = min(G_TILE, group - wid.z * G_TILE);
    let kv_len = kv_len_now();
    let range = splitk_range(kv_len);
    let span = range.y - range.x;
    if (c >= splitk_count(span)) {
        return;                                  // the whole workgroup: a surplus chunk
    }
    let chunk = splitk_chunk(span);
    let lo = range.x + c * chunk;
    let hi = min(lo + chunk, range.y);

    // Workgroup memory is not zeroed on lavapipe through wgpu-native (docs/lavapipe.md): write it all.
    for (var idx: u32 = t; idx < G_TILE * MAX_Q4; idx += WG) {
        let hh = idx / MAX_Q4;
        let d4 = idx % MAX_Q4;
        var qv = vec4<f32>(0.0);
        if (hh < ng && d4 < Q4) {
            let qb = (h0 + hh) * D + 4u * d4;
            qv = vec4<f32>(f32(q[qb]), f32(q[qb + 1u]), f32(q[qb + 2u]), f32(q[qb + 3u]));
        }
        qs[idx] = qv;
    }
    if (t < 2u * G_TILE) {
        atomicStore(&tile_max[t], 0u);
    }
    workgroupBarrier();

    let nslots = WG / Q4;
    let slot = t / Q4;
    let quad = t % Q4;
    var m: array<f32, G_TILE>;
    var l: array<f32, G_TILE>;
    var acc: array<vec4<f32>, G_TILE>;
    for (var hh: u32 = 0u; hh < G_TILE; hh++) {
        m[hh] = MASKED;
    }
    var parity: u32 = 0u;
    for (var base: u32 = lo; base < hi; base += TILE_KEYS) {
        // 1. scores of key base + t
        let j = base + t;
        let valid = j < hi;
        var row: u32 = 0u;
        var s: array<f32, G_TILE>;
        for (var hh: u32 = 0u; hh < G_TILE; hh++) {
            s[hh] = MASKED;
        }
        if (valid) {
            row = kv_row(j);
            let kb = (row * params.num_kv_heads + g) * D / {{K_DIV}}u;
            // Zeroed by hand each tile: without it the previous tile's sums stayed (on the H200 and on lavapipe;
            // Naga's SPIR-V initialises function variables once). tests: test_splitk_chunks_of_several_tiles.
            var dots: array<f32, G_TILE>;
            for (var hh: u32 = 0u; hh < G_TILE; hh++) {
                dots[hh] = 0.0;
            }
            for (var o: u32 = 0u; o < D / 8u; o++) {
                let ko = {{K_OCT}};
                for (var hh: u32 = 0u; hh < G_TILE; hh++) {
                    if (hh < ng) {
                        dots[hh] += dot(qs[hh * MAX_Q4 + 2u * o], ko[0]) + dot(qs[hh * MAX_Q4 + 2u * o + 1u], ko[1]);
                    }
                }
            }
            for (var hh: u32 = 0u; hh < G_TILE; hh++) {
                s[hh] = transform_score(dots[hh]);
            }
        }
        for (var hh: u32 = 0u; hh < G_TILE; hh++) {
            if (hh < ng) {
                let sm = subgroupMax(s[hh]);
                if (lane == 0u) {
                    atomicMax(&tile_max[parity * G_TILE + hh], order_bits(sm));
                }
            }
        }
        workgroupBarrier();
        // 2. probabilities against the new running max
        var corr: array<f32, G_TILE>;
        for (var hh: u32 = 0u; hh < G_TILE; hh++) {
            if (hh < ng) {
                let m_new = max(m[hh], from_order_bits(atomicLoad(&tile_max[parity * G_TILE + hh])));
                corr[hh] = exp(m[hh] - m_new);
                m[hh] = m_new;
                probs[t * G_TILE + hh] = select(0.0, exp(s[hh] - m_new), valid);
            }
        }
        rows[t] = row;
        if (t < G_TILE) {
            atomicStore(&tile_max[(1u - parity) * G_TILE + t], 0u);   // last read before the previous tile's 2nd barrier
        }
        parity = 1u - parity;
        workgroupBarrier();
        // 3. p * V; probs and rows are rewritten only after the next tile's first barrier
        if (slot < nslots) {
            for (var hh: u32 = 0u; hh < G_TILE; hh++) {
                acc[hh] *= corr[hh];
                l[hh] *= corr[hh];
            }
            let n_keys = min(TILE_KEYS, hi - base);
            for (var kk: u32 = slot; kk < n_keys; kk += nslots) {
                let vb = (rows[kk] * params.num_kv_heads + g) * Q4 + quad;
                let vq = {{V_QUAD}};
                for (var hh: u32 = 0u; hh < G_TILE; hh++) {
                    if (hh < ng) {
                        let p = probs[kk * G_TILE + hh];
                        acc[hh] += p * vq;
                        l[hh] += p;
                    }
                }
            }
        }
    }

    // Sum the slots' accumulators into qs (q is no longer needed), one slot per round.
    workgroupBarrier();
    for (var r: u32 = 0u; r < nslots; r++) {
        if (slot == r) {
            for (var hh: u32 = 0u; hh < G_TILE; hh++) {
                if (hh < ng) {
                    if (r == 0u) {
                        qs[hh * MAX_Q4 + quad] = acc[hh];
                    } else {
                        qs[hh * MAX_Q4 + quad] += acc[hh];
                    }
                    if (quad == 0u) {
                        if (r == 0u) {
                            l_total[hh] = l[hh];
                        } else {
                            l_total[hh] += l[hh];
                        }
                    }
                }
            }
        }
        workgroupBarrier();
    }
    for (var idx: u32 = t; idx < ng * Q4; idx += WG) {
        let hh = idx / Q4;
        let d4 = idx % Q4;
        let dst = ((h0 + hh) * params.num_chunks + c) * D + 4u * d4;
        let a = qs[hh * MAX_Q4 + d4];
        part_acc[dst] = a.x;
        part_acc[dst + 1u] = a.y;
        part_acc[dst + 2u] = a.z;
        part_acc[dst + 3u] = a.w;
    }
    for (var hh: u32 = 0u; hh < G_TILE; hh++) {
        if (hh < ng && t == hh) {
            let sl = (h0 + hh) * params.num_chunks + c;
            part_ml[sl * 2u] = m[hh];
            part_ml[sl * 2u + 1u] = l_total[hh];
        }
    }
}
