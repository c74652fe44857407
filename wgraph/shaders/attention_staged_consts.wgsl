// The staged split-K decode's tile shape, workgroup arrays and staging loads (attention_decode_staged.wgsl's
// header describes the kernel). Included after the kernel's bindings (q, k, v) and the chunk consts (G_TILE).
const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D: u32 = {{MAX_HEAD_DIM}}u;
const T: u32 = {{BLOCK_N}}u;                  // keys of a tile
//!include {{KV_PIECE}}
const ELEMS: u32 = 4u * PV4;                  // head dims in one 16-byte piece
const MAX_D4: u32 = MAX_D / 4u;               // 4-dim units of a row at most
const MAX_RP: u32 = MAX_D / ELEMS;            // 16-byte pieces of a row at most
const KSTRIDE: u32 = MAX_D4 + 1u;             // units from one staged K row to the next: padded, so the score
                                              // pass's lanes (neighbouring keys, one unit each) hit other banks
const NS: u32 = (T * MAX_RP + WG - 1u) / WG;  // pieces of K (and of V) a thread stages a tile
const NDP: u32 = WG / T;                      // dim parts of the score pass: thread (key t % T, part t / T)
const NSM: u32 = (G_TILE * T + WG - 1u) / WG; // (head, key) pairs of the softmax a thread takes
const GV4: u32 = G_TILE / 4u;                 // vec4s of one key's p over the block's heads
const_assert WG % T == 0u && T % 4u == 0u && G_TILE % 4u == 0u && MAX_D4 <= WG && MAX_D % ELEMS == 0u;

var<workgroup> ks: array<array<KvUnit, KSTRIDE>, T>;
var<workgroup> vs: array<array<KvUnit, MAX_D4>, T>;
var<workgroup> qs: array<array<vec4<f32>, MAX_D4>, G_TILE>;   // the block's q rows (zero past its ng heads)
// The score pass's partial dots (part dp, head hh, key kk at (dp * G_TILE + hh) * T + kk); at the end of the
// chunk, the merge's scratch (WG * G_TILE >= the NPART x D sums of one head, as G_TILE >= 4).
var<workgroup> sp: array<f32, WG * G_TILE>;
var<workgroup> sc: array<vec4<f32>, G_TILE * T / 4u>;   // the tile's scores: head hh, key kk at hh * T + kk
var<workgroup> pp: array<vec4<f32>, T * GV4>;           // the tile's p: key kk, heads 4j .. 4j + 3 at kk * GV4 + j
var<workgroup> mt: array<vec4<f32>, GV4>;               // the heads' running max after the tile

// A thread's staging slots: piece t + i * WG of a tile is key `key` of the tile, piece `pc` of its row (the
// same in every tile, so computed once); `at` is the piece's offset in a k/v row of all kv heads.
struct Slots {
    key: array<u32, NS>,
    pc: array<u32, NS>,
    at: array<u32, NS>,
    ok: array<bool, NS>,
}

struct Staged {
    k: array<vec4<u32>, NS>,
    v: array<vec4<u32>, NS>,
}

fn staging_slots(t: u32, rp: u32, col0: u32) -> Slots {
    var sl: Slots;
//!repeat i NS
    {
        let idx = t + ${i}u * WG;
        sl.ok[$i] = idx < T * rp;
        sl.key[$i] = idx / rp;
        sl.pc[$i] = idx % rp;
        sl.at[$i] = col0 + idx % rp;
    }
//!end
    return sl;
}

// The slots' K/V pieces of the tile of keys lo + kb .. + T (key indices clamped into the chunk's n keys, so a
// tile's tail reads a visible row, whose p is 0).
fn stage_load(sl: Slots, lo: u32, kb: u32, n: u32, row_stride: u32) -> Staged {
    var r: Staged;
//!repeat i NS
    r.k[$i] = vec4<u32>(0u);
    r.v[$i] = vec4<u32>(0u);
    if (sl.ok[$i]) {
        let at = kv_row(lo + min(kb + sl.key[$i], n - 1u)) * row_stride + sl.at[$i];
        r.k[$i] = k[at];
        r.v[$i] = v[at];
    }
//!end
    return r;
}

fn stage_store(sl: Slots, st: Staged) {
//!repeat i NS
    if (sl.ok[$i]) {
//!repeat e PV4
        ks[sl.key[$i]][sl.pc[$i] * PV4 + ${e}u] = unit_of(st.k[$i], ${e}u);
        vs[sl.key[$i]][sl.pc[$i] * PV4 + ${e}u] = unit_of(st.v[$i], ${e}u);
//!end
    }
//!end
}
