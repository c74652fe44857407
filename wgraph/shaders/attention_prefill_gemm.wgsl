// Flash-attention prefill shaped as two register-tiled GEMMs (FlashAttention 2 on CUDA cores). A workgroup takes
// BLOCK_M queries of one q head and walks the block's keys in tiles of BLOCK_N. Threads form a grid of RT row
// threads x CT column threads (t = ty * CT + tx); thread (ty, tx) owns rows ty + i * RT (i < TM).
// Per tile:
//   1. S = Q K^T as a GEMM over the head dims in chunks of DC4 vec4s: the chunk's Q rows and K rows are staged in
//      workgroup memory and thread (ty, tx) sums the TM x TN scores of its rows and keys tx + j * CT, so every
//      vec4 read feeds TN (q) or TM (k) vec4 FMAs instead of the flash kernel's 1. The raw dots go to `ps`.
//   2. Online softmax: LPR adjacent lanes own one row (its keys interleaved), mask and transform its scores,
//      take the tile max and sum through a subgroupShuffleXor butterfly (LPR <= 4: WebGPU's smallest subgroup),
//      write p back to `ps` and the row's correction to `corr_s`. The row's m and l live in those lanes.
//   3. O = O * corr + P V as a second GEMM over the tile's keys in chunks of VC: V rows staged in workgroup
//      memory, thread (ty, tx) owns the TM x DT4 vec4 block of rows ty + i * RT, dims tx + n * CT.
// All math is f32 (q.k in f16 broke FlashAttention's error rule: attention_prefill_flash.wgsl's header); f16
// inputs are widened once, when a tile is staged. Masks are intervals (key_range); a tile that some row of the
// block sees only in part skips, per row, the keys the row does not see, so a NaN in such a key's V reaches no
// row that does not see it (docs/errors.md). Dispatch: (num_heads, ceil(seq_len / BLOCK_M), 1), heads fastest and
// the block index reversed, so the GPU, which starts workgroups in index order, starts every head's block with the
// most keys first and the lightest blocks last (longest first: a short tail of idle SMs under causal masks).
// Loops over register arrays are unrolled with //!repeat.
{{ENABLE_F16}}
//!include attention_prefill_vec4_bindings.wgsl

//!include attention_gemm_tiles.wgsl

// The SM count the launch order below is tuned for (H100 SXM / H200: 132). One constant for every prefill_gemm
// entry: on a GPU with another count the order is still correct, only the pairing of heavy and light blocks moves.
const FOLD: u32 = 132u;

var<private> kv_len: u32;

fn row_keys(i: u32) -> vec2<u32> {
    return key_range(query_pos(i, kv_len), kv_len);
}

@compute @workgroup_size({{WORKGROUP_SIZE_X}}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) lane: u32) {
    // Launch index w (heads fastest, heaviest blocks first), its second FOLD-long segment reversed: with two
    // workgroups an SM placed round robin, SM j then runs the j-th heaviest block beside a light one instead of the
    // next-heaviest (benchmarks/causal_schedule.py).
    let n = nwg.x * nwg.y;
    var w = wid.y * nwg.x + wid.x;
    let fold_end = min(2u * FOLD, n);
    if (w >= FOLD && w < fold_end) {
        w = FOLD + fold_end - 1u - w;
    }
    let h = w % nwg.x;
    let i0 = (nwg.y - 1u - w / nwg.x) * BLOCK_M;
    let g = kv_head_of(h);
    let D4 = params.head_dim / 4u;
    let S = params.seq_len;
    let q0 = 0u;
    let lse0 = h * S;
    kv_len = kv_len_now();
//!include attention_gemm_body.wgsl
}
