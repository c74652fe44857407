// Batched fused split-K decode, step 1: attention_decode_fused.wgsl's one-pass chunk kernel (K and V of a step
// loaded together, q.k summed over a slot's lanes by subgroup shuffles, online softmax in registers) over a
// ragged batch with one query per sequence. Workgroup (c, g * blocks + blk, b) attends chunk c of sequence b's
// visible keys for q heads blk * G_TILE .. + G_TILE of kv head g; the chunk split is
// attention_batched_split.wgsl's, so surplus chunks of a short sequence return at once, and
// attention_batched_combine.wgsl merges the partials. Positions and rows come from
// attention_batched_common.wgsl; the rest is the single-sequence kernel's, described there.
{{ENABLE_F16}}
//!include attention_batched_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;   // 16-byte pieces: ELEMS dims each
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(9) var<storage, read_write> part_ml: array<f32>;
@group(0) @binding(10) var<storage, read_write> part_acc: array<f32>;

const CHUNK_STEP: u32 = {{CHUNK_STEP}}u;
const CHUNK_MAX: u32 = {{CHUNK_MAX}}u;
const G_TILE: u32 = {{G_TILE}}u;
const SPLIT_TARGET: u32 = {{SPLIT_TARGET}}u; // workgroups the planner aims for (chunks x kv heads x blocks x B)
const_assert CHUNK_MAX % CHUNK_STEP == 0u;
//!include attention_batched_split.wgsl

const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D: u32 = {{MAX_HEAD_DIM}}u;
const U: u32 = {{KEYS_PER_THREAD}}u;          // keys a slot takes per step
const PV4: u32 = {{PIECE_VEC4S}}u;            // vec4<f32>s in one 16-byte piece: 2 (f16 kv) or 1 (f32 kv)
const ELEMS: u32 = 4u * PV4;                  // head dims in one piece
const DPL: u32 = {{DIMS_PER_LANE}}u;          // head dims a lane owns
const PPL: u32 = DPL / ELEMS;                 // pieces a lane loads per key row
const Q4: u32 = G_TILE * PPL * PV4;           // vec4s of q (and of acc) a lane holds
const_assert DPL % ELEMS == 0u;

// the slots' partial dots (when a slot spans subgroups), then their m and l, then their acc
var<workgroup> red: array<f32, max(max(WG * DPL, 2u * G_TILE * WG), WG * U * G_TILE)>;

fn piece(w: vec4<u32>, e: u32) -> vec4<f32> {
    {{PIECE_BODY}}
}

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_lane: u32) {
    let c = wid.x;
    let b = wid.z;
    let D = params.head_dim;
    let group = params.num_heads / params.num_kv_heads;
    let blocks = (group + G_TILE - 1u) / G_TILE;
    let g = wid.y / blocks;
    let blk = wid.y % blocks;
    let h0 = g * group + blk * G_TILE;
    let ng = min(G_TILE, group - blk * G_TILE);
    let sq = seq_q(b);
    let sk = seq_k(b);
    enter_seq(b, sk.x);
    if (sq.y == 0u) {
        return;
    }
    let range = visible(sq.y - 1u, sq.y, sk.y);  // the one query of the step: the sequence's last
    let span = range.y - range.x;
    if (c >= split_count(span)) {
        return;                                   // the whole workgroup: a surplus chunk
    }
    let qrow = sq.x + sq.y - 1u;
    let chunk = split_chunk(span);
    let lo = range.x + c * chunk;
    let n = min(chunk, range.y - lo);

    // A slot's LPR lanes are neighbours in one subgroup, whatever order the device numbers subgroups.
    let t = sg * sg_size + sg_lane;
    let LPR = D / DPL;                            // lanes per key row (a power of two <= subgroup size)
    let KS = WG / LPR;                            // slots
    let slot = t / LPR;
    let lane = t % LPR;
    let row_stride = params.num_kv_heads * (D / ELEMS);   // pieces from one kv row to the next
    let col = g * (D / ELEMS) + lane;             // the lane's first piece in a row; piece p at col + p * LPR

    // q dims of the block's heads: qr[(hh * PPL + p) * PV4 + e] = dims (p * LPR + lane) * ELEMS + 4e .. + 3
    var qr: array<vec4<f32>, Q4>;
//!repeat hh G_TILE
//!repeat p PPL
//!repeat e PV4
    {
        var x = vec4<f32>(0.0);
        if (${hh}u < ng) {
            let qb = (qrow * params.num_heads + h0 + ${hh}u) * D + (${p}u * LPR + lane) * ELEMS + ${e}u * 4u;
            x = vec4<f32>(f32(q[qb]), f32(q[qb + 1u]), f32(q[qb + 2u]), f32(q[qb + 3u]));
        }
        qr[(${hh}u * PPL + ${p}u) * PV4 + ${e}u] = x;
    }
//!end
//!end
//!end

    var m: array<f32, G_TILE>;
    var l: array<f32, G_TILE>;
    var acc: array<vec4<f32>, Q4>;
//!repeat hh G_TILE
    m[$hh] = MASKED;
    l[$hh] = 0.0;
//!end
//!repeat i Q4
    acc[$i] = vec4<f32>(0.0);
//!end

    // K/V pieces of a step: [u * PPL + p]. Key indices are clamped into the chunk rather than guarded, so no
    // branch stands between the loads; a clamped key gets p = 0.
    var kw: array<vec4<u32>, U * PPL>;
    var vw: array<vec4<u32>, U * PPL>;
//!repeat u U
    {
        let r = kv_row(lo + min(${u}u * KS + slot, n - 1u)) * row_stride + col;
//!repeat p PPL
        kw[${u}u * PPL + ${p}u] = k[r + ${p}u * LPR];
        vw[${u}u * PPL + ${p}u] = v[r + ${p}u * LPR];
//!end
    }
//!end
    for (var kb: u32 = 0u; kb < n; kb += KS * U) {
        let kc = kw;
        let vc = vw;
//!repeat u U
        {
            let r = kv_row(lo + min(kb + KS * U + ${u}u * KS + slot, n - 1u)) * row_stride + col;
//!repeat p PPL
            kw[${u}u * PPL + ${p}u] = k[r + ${p}u * LPR];
            vw[${u}u * PPL + ${p}u] = v[r + ${p}u * LPR];
//!end
        }
//!end
        // partial dots s[u * G_TILE + hh], then summed over the slot's lanes
        var s: array<f32, U * G_TILE>;
//!repeat u U
//!repeat hh G_TILE
        {
            var d: f32 = 0.0;
//!repeat p PPL
//!repeat e PV4
            d += dot(qr[(${hh}u * PPL + ${p}u) * PV4 + ${e}u], piece(kc[${u}u * PPL + ${p}u], ${e}u));
//!end
//!end
            s[${u}u * G_TILE + ${hh}u] = d;
        }
//!end
//!end
        if (LPR <= sg_size) {
            for (var mask: u32 = LPR / 2u; mask > 0u; mask /= 2u) {
//!repeat i U * G_TILE
                s[$i] += subgroupShuffleXor(s[$i], mask);
//!end
            }
        } else {
            // a slot spans subgroups (a device whose subgroups are smaller than LPR, such as lavapipe's 8
            // lanes at head_dim 128): the lanes' partials meet in workgroup memory, two barriers a step
            workgroupBarrier();                  // the previous step's sums are read
//!repeat i U * G_TILE
            red[(slot * LPR + lane) * U * G_TILE + ${i}u] = s[$i];
//!end
            workgroupBarrier();
//!repeat i U * G_TILE
            {
                var sum: f32 = 0.0;
                for (var l2: u32 = 0u; l2 < LPR; l2++) {
                    sum += red[(slot * LPR + l2) * U * G_TILE + ${i}u];
                }
                s[$i] = sum;
            }
//!end
        }
        // one online-softmax update per head for the step's U keys
//!repeat hh G_TILE
        {
            var mx = m[$hh];
//!repeat u U
            let valid$u = kb + ${u}u * KS + slot < n;
            let s$u = transform_score(s[${u}u * G_TILE + ${hh}u]);
            mx = max(mx, select(MASKED, s$u, valid$u));
//!end
            let alpha = exp(m[$hh] - mx);
            m[$hh] = mx;
            var ls = l[$hh] * alpha;
//!repeat u U
            let p$u = select(0.0, exp(s$u - mx), valid$u);
            ls += p$u;
//!end
            l[$hh] = ls;
//!repeat p PPL
//!repeat e PV4
            {
                var a = acc[(${hh}u * PPL + ${p}u) * PV4 + ${e}u] * alpha;
//!repeat u U
                a += p$u * piece(vc[${u}u * PPL + ${p}u], ${e}u);
//!end
                acc[(${hh}u * PPL + ${p}u) * PV4 + ${e}u] = a;
            }
//!end
//!end
        }
//!end
    }

    // Merge the KS slots: red[hh * WG + slot] = m, red[(G_TILE + hh) * WG + slot] = l (written by lane 0).
    workgroupBarrier();                          // the last step's partial dots are read
    if (lane == 0u) {
//!repeat hh G_TILE
        red[${hh}u * WG + slot] = m[$hh];
        red[(G_TILE + ${hh}u) * WG + slot] = l[$hh];
//!end
    }
    workgroupBarrier();
    var mw: array<f32, G_TILE>;                  // the chunk's max per head, then this slot's weight
    var lt: array<f32, G_TILE>;                  // the chunk's l per head
//!repeat hh G_TILE
    {
        var mm = MASKED;
        for (var r: u32 = 0u; r < KS; r++) {
            mm = max(mm, red[${hh}u * WG + r]);
        }
        var ll = 0.0;
        for (var r: u32 = 0u; r < KS; r++) {
            ll += exp(red[${hh}u * WG + r] - mm) * red[(G_TILE + ${hh}u) * WG + r];
        }
        lt[$hh] = ll;
        mw[$hh] = mm;
    }
//!end
    let sl0 = (b * params.num_heads + h0) * params.num_chunks + c;
//!repeat hh G_TILE
    if (${hh}u < ng) {
        let wgt = exp(m[$hh] - mw[$hh]);
        workgroupBarrier();                      // red's previous contents are read
//!repeat p PPL
//!repeat e PV4
        {
            let a = acc[(${hh}u * PPL + ${p}u) * PV4 + ${e}u] * wgt;
            let at = slot * D + (${p}u * LPR + lane) * ELEMS + ${e}u * 4u;
            red[at] = a.x;
            red[at + 1u] = a.y;
            red[at + 2u] = a.z;
            red[at + 3u] = a.w;
        }
//!end
//!end
        workgroupBarrier();
        let sl = sl0 + ${hh}u * params.num_chunks;
        for (var d: u32 = t; d < D; d += WG) {
            var sum: f32 = 0.0;
            for (var r: u32 = 0u; r < KS; r++) {
                sum += red[r * D + d];
            }
            part_acc[sl * D + d] = sum;
        }
        if (t == 0u) {
            part_ml[sl * 2u] = mw[$hh];
            part_ml[sl * 2u + 1u] = lt[$hh];
        }
    }
//!end
}
