// The GEMM-shaped flash kernel's tile shape, workgroup arrays and ps layout: included by
// attention_prefill_gemm.wgsl and attention_batched_gemm.wgsl (their header describes the kernel).
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
const QS: u32 = DC4 + 1u;                   // padded stride of a staged Q/K row: lanes reading 8 K rows hit 8 bank groups
const_assert BLOCK_M % TM == 0u && TM % 4u == 0u;
const_assert WG % RT == 0u && BLOCK_N == CT * TN && ROW4 % CT == 0u;
const_assert WG % BLOCK_M == 0u && LPR <= 4u && BLOCK_N % LPR == 0u;
const_assert ROW4 % DC4 == 0u && BLOCK_N % VC == 0u;

var<workgroup> qs: array<vec4<f32>, BLOCK_M * QS>;
var<workgroup> ks: array<vec4<f32>, BLOCK_N * QS>;
var<workgroup> vs: array<vec4<f32>, VC * ROW4>;
// Scores, then p, of the tile: key kk, row ty + i * RT at vec4 (kk * RT + ty) * TM4 + i / 4, component i % 4,
// so step 3 reads a thread's TM rows of one key as TM4 vec4s.
var<workgroup> ps: array<vec4<f32>, BLOCK_N * RT * TM4>;
var<workgroup> corr_s: array<f32, BLOCK_M>;      // per row: the tile's correction; after the last tile 1 / l

// ps's vec4 and component of (key kk, block row r)
fn p_slot(kk: u32, r: u32) -> vec2<u32> {
    let i = r / RT;
    return vec2<u32>((kk * RT + r % RT) * TM4 + i / 4u, i % 4u);
}
