// Batched split-K decode, step 1: one query per sequence (a decode step of B requests). Workgroup
// (c, g * blocks + blk, b) attends chunk c of sequence b's visible keys for q heads blk * G_TILE .. + G_TILE
// of kv head g, so every K/V byte is read once per kv head (GQA) and the grid holds B x Hkv x chunks
// workgroups in one dispatch. The chunk split follows attention_decode_splitk_common.wgsl: a function of the
// sequence's visible span and the uniform num_chunks, so a sequence shorter than the capacity the grid was
// planned for leaves its surplus chunks idle (they return at once) and a cache_seqlens read on the GPU needs
// no re-planning. The body is attention_decode_splitk.wgsl's (16-byte coalesced K/V loads, LPR lanes per
// key row, KS key slots, U rows in flight, softmax once per chunk in workgroup memory); it writes each
// head's unnormalised (m, l, acc) to part_ml / part_acc, and attention_batched_combine.wgsl merges them.
// head_dim % 8 == 0.
{{ENABLE_F16}}
//!include attention_batched_common.wgsl
@group(0) @binding(1) var<storage, read> q: array<{{Q_T}}>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;   // 16-byte pieces: ELEMS dims each
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(9) var<storage, read_write> part_ml: array<f32>;
@group(0) @binding(10) var<storage, read_write> part_acc: array<f32>;

const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D: u32 = {{MAX_HEAD_DIM}}u;
const U: u32 = {{KEYS_PER_THREAD}}u;
const PV4: u32 = {{PIECE_VEC4S}}u;           // vec4<f32>s in one 16-byte piece: 2 (f16 kv) or 1 (f32 kv)
const ELEMS: u32 = 4u * PV4;
const CHUNK_STEP: u32 = {{CHUNK_STEP}}u;
const CHUNK_MAX: u32 = {{CHUNK_MAX}}u;
const G_TILE: u32 = {{G_TILE}}u;
const SPLIT_TARGET: u32 = {{SPLIT_TARGET}}u; // workgroups the planner aims for (chunks x kv heads x blocks x B)
const RED_PARTIALS: u32 = WG * U * G_TILE + MAX_D / ELEMS;
const RED_LEN: u32 = max(max(RED_PARTIALS, WG * ELEMS), WG);
const_assert WG % G_TILE == 0u;
const_assert MAX_D / ELEMS <= WG;
const_assert CHUNK_MAX % CHUNK_STEP == 0u;

var<workgroup> red: array<f32, RED_LEN>;
var<workgroup> sc: array<f32, CHUNK_MAX * G_TILE>;
var<workgroup> stat: array<f32, 2u * G_TILE>;

fn piece(w: vec4<u32>, e: u32) -> vec4<f32> {
    {{PIECE_BODY}}
}

//!include attention_batched_split.wgsl

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
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
        return;                                  // the whole workgroup: a surplus chunk
    }
    let chunk = split_chunk(span);
    let lo = range.x + c * chunk;
    let n = min(chunk, range.y - lo);
    let qrow = sq.x + sq.y - 1u;

    let LPR = D / ELEMS;
    let KS = WG / LPR;
    let slot = t / LPR;
    let lane = t % LPR;
    let in_slot = slot < KS;
    let pairs = KS * U * G_TILE;
    let pstride = pairs + 1u;
    let row_stride = params.num_kv_heads * LPR;

    var qr: array<vec4<f32>, G_TILE * PV4>;
//!repeat hh G_TILE
//!repeat e PV4
    {
        var x = vec4<f32>(0.0);
        if (in_slot && ${hh}u < ng) {
            let qb = (qrow * params.num_heads + h0 + ${hh}u) * D + lane * ELEMS + ${e}u * 4u;
            x = vec4<f32>(f32(q[qb]), f32(q[qb + 1u]), f32(q[qb + 2u]), f32(q[qb + 3u]));
        }
        qr[${hh}u * PV4 + ${e}u] = x;
    }
//!end
//!end

    // 1. scores into sc[j * G_TILE + head], U loads in flight ahead of the math (as the split-K kernel).
    var w: array<vec4<u32>, U>;
//!repeat u U
    w[$u] = k[kv_row(lo + min(${u}u * KS + slot, n - 1u)) * row_stride + g * LPR + lane];
//!end
    for (var kb: u32 = 0u; kb < n; kb += KS * U) {
        let cur = w;
//!repeat u U
        w[$u] = k[kv_row(lo + min(kb + KS * U + ${u}u * KS + slot, n - 1u)) * row_stride + g * LPR + lane];
//!end
        if (in_slot) {
//!repeat u U
//!repeat hh G_TILE
            {
                var d: f32 = 0.0;
//!repeat e PV4
                d += dot(qr[${hh}u * PV4 + ${e}u], piece(cur[$u], ${e}u));
//!end
                red[lane * pstride + (${u}u * KS + slot) * G_TILE + ${hh}u] = d;
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
        workgroupBarrier();
    }

//!repeat u U
    w[$u] = v[kv_row(lo + min(${u}u * KS + slot, n - 1u)) * row_stride + g * LPR + lane];
//!end

    // 2. softmax over the chunk, per head.
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
        let p = exp(sc[j * G_TILE + hh_t] - m_t);
        sc[j * G_TILE + hh_t] = p;
        lsum += p;
    }
    red[t] = lsum;
    workgroupBarrier();
    if (t < G_TILE) {
        var l: f32 = 0.0;
        for (var i: u32 = t; i < WG; i += G_TILE) {
            l += red[i];
        }
        stat[G_TILE + t] = l;
    }

    // 3. p.V in registers.
    var acc: array<vec4<f32>, G_TILE * PV4>;
//!repeat i G_TILE * PV4
    acc[$i] = vec4<f32>(0.0);
//!end
    if (in_slot) {
        for (var kb: u32 = 0u; kb < n; kb += KS * U) {
            let cur = w;
//!repeat u U
            w[$u] = v[kv_row(lo + min(kb + KS * U + ${u}u * KS + slot, n - 1u)) * row_stride + g * LPR + lane];
//!end
//!repeat u U
            {
                let j = min(kb + ${u}u * KS + slot, n - 1u);
                let valid = kb + ${u}u * KS + slot < n;
//!repeat e PV4
                {
                    let x = select(vec4<f32>(0.0), piece(cur[$u], ${e}u), valid);
//!repeat hh G_TILE
                    acc[${hh}u * PV4 + ${e}u] += sc[j * G_TILE + ${hh}u] * x;
//!end
                }
//!end
            }
//!end
        }
    }

    // The slots' sums, one head at a time.
//!repeat hh G_TILE
    if (${hh}u < ng) {
        workgroupBarrier();
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
        let sl = (b * params.num_heads + h0 + ${hh}u) * params.num_chunks + c;
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
