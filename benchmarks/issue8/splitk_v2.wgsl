// Split-K (flash-decoding) decode, step 1. Workgroup (c, g, b) attends chunk c of the decode query's
// visible keys for the q heads b * G_TILE .. b * G_TILE + G_TILE - 1 of kv head g, so every K/V byte is read
// from memory once per kv head, not once per q head (GQA). It writes each head's unnormalised (m, l, acc)
// to part_ml / part_acc; attention_decode_splitk_combine.wgsl merges the chunks.
//
// Memory is what bounds decode, so loads are 16 bytes and coalesced: a K/V row of head_dim values is
// LPR = head_dim / ELEMS 16-byte pieces, and LPR consecutive threads (the "lanes" of one key slot) read one
// row's pieces side by side; KS = WG / LPR slots read KS rows at once, each thread U rows in flight.
//   1. scores: a thread dots its piece of U keys with its piece of the G_TILE q heads (q in registers);
//      the LPR partial dots of a key go through workgroup memory (no subgroup size assumed) and one thread
//      per (key, head) sums them into sc. Every key of the chunk is visible (the chunk lies inside
//      key_range()), so there is no mask.
//   2. softmax once per chunk (the chunk fits sc: the planner sizes chunks <= CHUNK_MAX): max and sum
//      per head by a two-level reduction; sc holds p = exp(s - m).
//   3. p.V: the same thread layout reads V pieces and accumulates G_TILE heads x ELEMS dims in registers;
//      the KS slots' sums meet in workgroup memory at the end, one head at a time.
// Dispatch: (chunks, num_kv_heads, head blocks), direct or indirect (attention_decode_splitk_prepare.wgsl).
// head_dim % 8 == 0 (whole 16-byte pieces for f16 and f32). Loops over register arrays are //!repeat.
{{ENABLE_F16}}
//!include attention_params.wgsl
//!include attention_decode_splitk_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;   // 16-byte pieces: ELEMS dims each
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read_write> part_ml: array<f32>;
@group(0) @binding(8) var<storage, read_write> part_acc: array<f32>;

const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D: u32 = {{MAX_HEAD_DIM}}u;
const U: u32 = {{KEYS_PER_THREAD}}u;         // keys a thread has in flight per step
const PV4: u32 = {{PIECE_VEC4S}}u;           // vec4<f32>s in one 16-byte piece: 2 (f16 kv) or 1 (f32 kv)
const ELEMS: u32 = 4u * PV4;                 // head dims in one piece
// Partial dots of one step: LPR rows of (pairs + 1) floats, pairs = KS * U * G_TILE (key, head) sums; the +1
// makes the row stride odd, so lanes writing one pair hit different banks. LPR * KS <= WG.
const RED_PARTIALS: u32 = WG * U * G_TILE + MAX_D / ELEMS;
const RED_LEN: u32 = max(max(RED_PARTIALS, WG * ELEMS), WG);
const_assert WG % G_TILE == 0u;
const_assert MAX_D / ELEMS <= WG;

var<workgroup> red: array<f32, RED_LEN>;                 // partial dots; reductions; the slots' sums
var<workgroup> sc: array<f32, CHUNK_MAX * G_TILE>;       // the chunk's scores, then p, by [key][head]
var<workgroup> stat: array<f32, 2u * G_TILE>;            // m, l per head

fn piece(w: vec4<u32>, e: u32) -> vec4<f32> {
    {{PIECE_BODY}}
}

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let c = wid.x;
    let g = wid.y;
    let D = params.head_dim;
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
    let n = min(chunk, range.y - lo);

    let LPR = D / ELEMS;                         // lanes per key
    let KS = WG / LPR;                           // key slots
    let slot = t / LPR;
    let lane = t % LPR;
    let in_slot = slot < KS;
    let pairs = KS * U * G_TILE;
    let pstride = pairs + 1u;
    let row_stride = params.num_kv_heads * LPR; // pieces from one kv row to the next

    // q pieces of the block's heads, in registers for the scores phase.
    var qr: array<vec4<f32>, G_TILE * PV4>;
//!repeat hh G_TILE
//!repeat e PV4
    {
        var x = vec4<f32>(0.0);
        if (in_slot && ${hh}u < ng) {
            let qb = (h0 + ${hh}u) * D + lane * ELEMS + ${e}u * 4u;
            x = vec4<f32>(f32(q[qb]), f32(q[qb + 1u]), f32(q[qb + 2u]), f32(q[qb + 3u]));
        }
        qr[${hh}u * PV4 + ${e}u] = x;
    }
//!end
//!end

    // 1. scores into sc[j * G_TILE + head]
    for (var kb: u32 = 0u; kb < n; kb += KS * U) {
        // All U loads are issued before any math uses them: key indices are clamped into the chunk rather
        // than guarded, so no branch stands between them (a surplus key's dots are never summed).
        var w: array<vec4<u32>, U>;
//!repeat u U
        w[$u] = k[kv_row(lo + min(kb + ${u}u * KS + slot, n - 1u)) * row_stride + g * LPR + lane];
//!end
        if (in_slot) {
//!repeat u U
//!repeat hh G_TILE
            {
                var d: f32 = 0.0;
//!repeat e PV4
                d += dot(qr[${hh}u * PV4 + ${e}u], piece(w[$u], ${e}u));
//!end
                red[lane * pstride + (${u}u * KS + slot) * G_TILE + ${hh}u] = d;   // pair (key, head)
            }
//!end
//!end
        }
        workgroupBarrier();
        for (var p: u32 = t; p < pairs; p += WG) {
            let j = kb + p / G_TILE;
            if (j < n) {
                var s: f32 = 0.0;
                for (var l: u32 = 0u; l < LPR; l++) {
                    s += red[l * pstride + p];
                }
                sc[j * G_TILE + p % G_TILE] = transform_score(s);
            }
        }
        workgroupBarrier();                      // red is rewritten by the next step; sc is complete after the last
    }

    // 2. softmax over the chunk, per head. Thread t serves head t % G_TILE, keys t / G_TILE + i * (WG / G_TILE).
    let hh_t = t % G_TILE;
    var mx: f32 = MASKED;
    for (var j: u32 = t / G_TILE; j < n; j += WG / G_TILE) {
        mx = max(mx, sc[j * G_TILE + hh_t]);
    }
    red[t] = mx;
    workgroupBarrier();
    if (t < G_TILE) {
        var m: f32 = MASKED;
        for (var i: u32 = t; i < WG; i += G_TILE) {
            m = max(m, red[i]);
        }
        stat[t] = m;
    }
    workgroupBarrier();
    let m_t = stat[hh_t];
    var lsum: f32 = 0.0;
    for (var j: u32 = t / G_TILE; j < n; j += WG / G_TILE) {
        let p = exp(sc[j * G_TILE + hh_t] - m_t);   // a NaN score stays NaN: its row's output is NaN
        sc[j * G_TILE + hh_t] = p;
        lsum += p;
    }
    red[t] = lsum;                               // the maxima in red were read before stat's barrier
    workgroupBarrier();                          // p in sc and the sums in red are complete
    if (t < G_TILE) {
        var l: f32 = 0.0;
        for (var i: u32 = t; i < WG; i += G_TILE) {
            l += red[i];
        }
        stat[G_TILE + t] = l;
    }

    // 3. p.V in registers: acc[head * PV4 + e] holds dims lane * ELEMS + 4e .. + 3 of that head.
    var acc: array<vec4<f32>, G_TILE * PV4>;
//!repeat i G_TILE * PV4
    acc[$i] = vec4<f32>(0.0);
//!end
    if (in_slot) {
        for (var kb: u32 = 0u; kb < n; kb += KS * U) {
            var w: array<vec4<u32>, U>;          // loads first, as in step 1
//!repeat u U
            w[$u] = v[kv_row(lo + min(kb + ${u}u * KS + slot, n - 1u)) * row_stride + g * LPR + lane];
//!end
//!repeat u U
            {
                let j = min(kb + ${u}u * KS + slot, n - 1u);
                let valid = kb + ${u}u * KS + slot < n;
//!repeat e PV4
                {
                    let x = select(vec4<f32>(0.0), piece(w[$u], ${e}u), valid);   // a clamped key adds nothing
//!repeat hh G_TILE
                    acc[${hh}u * PV4 + ${e}u] += sc[j * G_TILE + ${hh}u] * x;
//!end
                }
//!end
            }
//!end
        }
    }

    // The slots' sums, one head at a time: red[slot * D + dim].
//!repeat hh G_TILE
    if (${hh}u < ng) {
        workgroupBarrier();                      // red's previous contents are read
        if (in_slot) {
//!repeat e PV4
            {
                let a = acc[${hh}u * PV4 + ${e}u];
                let at = slot * D + lane * ELEMS + ${e}u * 4u;
                red[at] = a.x;
                red[at + 1u] = a.y;
                red[at + 2u] = a.z;
                red[at + 3u] = a.w;
            }
//!end
        }
        workgroupBarrier();
        let sl = (h0 + ${hh}u) * params.num_chunks + c;
        for (var d: u32 = t; d < D; d += WG) {
            var s: f32 = 0.0;
            for (var r: u32 = 0u; r < KS; r++) {
                s += red[r * D + d];
            }
            part_acc[sl * D + d] = s;
        }
        if (t == 0u) {
            part_ml[sl * 2u] = stat[${hh}u];
            part_ml[sl * 2u + 1u] = stat[G_TILE + ${hh}u];
        }
    }
//!end
}
