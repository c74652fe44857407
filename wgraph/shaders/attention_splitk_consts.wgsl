const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D: u32 = {{MAX_HEAD_DIM}}u;
const U: u32 = {{KEYS_PER_THREAD}}u;         // keys a thread has in flight per step
//!include {{KV_PIECE}}
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
