// The GEMM-shaped flash kernel's tile shape, workgroup memory, ps layout and staging loads: included by
// attention_prefill_gemm.wgsl and attention_batched_gemm.wgsl after their bindings (attention_prefill_gemm.wgsl's
// header describes the kernel).
const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const BLOCK_M: u32 = {{BLOCK_M}}u;
const BLOCK_N: u32 = {{BLOCK_N}}u;
const TM: u32 = {{ROWS_PER_THREAD}}u;       // rows of a thread, both GEMMs
const TN: u32 = {{KEYS_PER_THREAD}}u;       // keys of a thread in S = Q K^T
const DC4: u32 = {{D_CHUNK}}u;              // vec4s of head dims staged per step of S = Q K^T
const VC: u32 = {{V_CHUNK}}u;               // keys of V staged per step of P V
const ROW4: u32 = {{MAX_HEAD_DIM}}u / 4u;   // vec4s in one padded Q/K/V row
const RT: u32 = BLOCK_M / TM;                    // row threads
const CT: u32 = WG / RT;                    // column threads
const TM4: u32 = TM / 4u;                   // vec4s of p a thread reads per key
const DT4: u32 = ROW4 / CT;                 // vec4s of head dims a thread owns in P V
const LPR: u32 = WG / BLOCK_M;                   // lanes of a row in the softmax
const KPL: u32 = BLOCK_N / LPR;                  // keys of a lane in the softmax
const PREFETCH: bool = {{PREFETCH}};        // load the next chunk into registers before this chunk's FMAs
const NQ: u32 = (BLOCK_M * DC4 + WG - 1u) / WG;   // Q vec4s a thread stages per chunk
const NK: u32 = (BLOCK_N * DC4 + WG - 1u) / WG;   // K vec4s
const NV: u32 = (VC * ROW4 + WG - 1u) / WG;       // V vec4s
const QS: u32 = DC4 + 1u;                   // padded stride of a staged Q/K row: lanes reading 8 K rows hit 8 bank groups
const_assert BLOCK_M % TM == 0u && TM % 4u == 0u;
const_assert WG % RT == 0u && BLOCK_N == CT * TN && ROW4 % CT == 0u;
const_assert WG % BLOCK_M == 0u && LPR <= 4u && BLOCK_N % LPR == 0u;
const_assert ROW4 % DC4 == 0u && BLOCK_N % VC == 0u;

// Workgroup memory is one array in two phases. S = Q K^T stages chunks of Q and K (qs, ks); once its last chunk is
// summed (a barrier) they are dead, and the tile's scores, then p (ps), and P V's chunks of V (vs) use the same bytes
// until P V's last barrier. So a tile costs max(qs + ks, ps + vs) bytes, not their sum (20736 at 64 x 64, where four
// arrays took 30976). As one flat array the kernels also compile to 127-128 registers a thread on an H100, where
// four two-level arrays held 149-167: two 256-thread workgroups an SM instead of one (docs/attention.md).
// Scores, then p: key kk, block row ty + i * RT at ps[kk][ty * TM4 + i / 4], component i % 4 (p_slot), so P V
// reads a thread's TM rows of one key as TM4 vec4s.
const PW: u32 = RT * TM4;                   // vec4s in one ps row (one key)
const KS_AT: u32 = BLOCK_M * QS;            // qs: BLOCK_M rows of QS vec4s at 0, then ks: BLOCK_N rows
const VS_AT: u32 = BLOCK_N * PW;            // ps: BLOCK_N rows of PW vec4s at 0, then vs: VC rows of ROW4
const SMEM4: u32 = max(KS_AT + BLOCK_N * QS, VS_AT + VC * ROW4);
var<workgroup> smem: array<vec4<f32>, SMEM4>;
var<workgroup> corr_s: array<f32, BLOCK_M>;      // per row: the tile's correction; after the last tile 1 / l

// smem indices of qs[r][c] and ks[r][c] (vec4 c of the chunk, Q row / K key r), ps[kk][v] and vs[kk][d] (head-dim
// vec4 d of the chunk's V key kk)
fn qs_at(r: u32, c: u32) -> u32 {
    return r * QS + c;
}

fn ks_at(r: u32, c: u32) -> u32 {
    return KS_AT + r * QS + c;
}

fn ps_at(kk: u32, v: u32) -> u32 {
    return kk * PW + v;
}

fn vs_at(kk: u32, d: u32) -> u32 {
    return VS_AT + kk * ROW4 + d;
}

// ps's (key, vec4, component) of (key kk, block row r)
fn p_slot(kk: u32, r: u32) -> vec3<u32> {
    let i = r / RT;
    return vec3<u32>(kk, (r % RT) * TM4 + i / 4u, i % 4u);
}

// Staging: thread t stages vec4s t + n * WG of a chunk. A Q slot's row is the same in every chunk and tile, a K
// slot's in every chunk of a tile, so their addresses (at) are computed once and a chunk adds its vec4 offset;
// `ok` is false past the sequence's queries or the tile's keys. Loads are zero past the head dim.
struct Slots {
    q_at: array<u32, NQ>,
    q_ok: array<bool, NQ>,
    k_at: array<u32, NK>,
    k_ok: array<bool, NK>,
}

// Staged vec4s stay in their storage type (f16: half the registers) until they are written to workgroup memory:
// widened at the load, an f16 chunk's conversions sit right after the loads the prefetch means to overlap, where
// an in-order warp waits for them (kept f16, the f16 prefill rows took 0.93-0.99x the time on an H100:
// benchmarks/results/h100-rev-candidates-1207.log).
struct StagedQK {
    q: array<vec4<{{Q_T}}>, NQ>,
    k: array<vec4<{{KV_T}}>, NK>,
}

// Chunk `c` (vec4 offset into the head dims) of this thread's Q and K slots.
fn stage_qk(sl: Slots, t: u32, c: u32, D4: u32) -> StagedQK {
    var r: StagedQK;
//!repeat n NQ
    r.q[$n] = vec4<{{Q_T}}>(0.0);
    if (sl.q_ok[$n] && c + (t + ${n}u * WG) % DC4 < D4) {
        r.q[$n] = q[sl.q_at[$n] + c];
    }
//!end
//!repeat n NK
    r.k[$n] = vec4<{{KV_T}}>(0.0);
    if (sl.k_ok[$n] && c + (t + ${n}u * WG) % DC4 < D4) {
        r.k[$n] = kv_k4(sl.k_at[$n] + c);
    }
//!end
    return r;
}

// This thread's V vec4s of the VC keys from tile key k0 (tile keys from `base`, n_keys of them; kv head g).
fn stage_v(t: u32, base: u32, k0: u32, n_keys: u32, g: u32, D4: u32) -> array<vec4<{{KV_T}}>, NV> {
    var r: array<vec4<{{KV_T}}>, NV>;
//!repeat n NV
    {
        let idx = t + ${n}u * WG;
        r[$n] = vec4<{{KV_T}}>(0.0);
        if (idx < VC * ROW4 && k0 + idx / ROW4 < n_keys && idx % ROW4 < D4) {
            r[$n] = kv_v4((kv_row(base + k0 + idx / ROW4) * params.num_kv_heads + g) * D4 + idx % ROW4);
        }
    }
//!end
    return r;
}
