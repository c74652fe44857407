// Q6_K lanes for quant_gemv.wgsl: 210-byte super-blocks of 256 weights: ql (128 bytes: low 4 bits), qh (64:
// high 2 bits), 16 int8 scales (one a 16 weights), f16 d; w = d * scale * (q - 32). 210 bytes: an odd block
// starts 2 bytes into a word, so a lane reads each 4-byte field as the funnel of the two words it spans (two
// loads). Half n of a block (weights 128n ..): ql word 64n + 4t (A) holds weights 128n + 4t .. + 3 in its low
// nibbles and the same + 64 in its high ones, ql word 64n + 32 + 4t (B) the same + 32 and + 96; qh word
// 32n + 4t (H) their top bits (bits 0-1, 2-3, 4-5, 6-7 of each byte). Lane t of a block's 8 takes A, B, H of
// both halves: x vectors 32n + 8m + t (m = 0..3: A low, B low, A high, B high), i.e. vectors t + 8i, i = 4n + m
// (neighbours across the lanes: quant_x_interleaved.wgsl); their scales are bytes 8n + 2m + t / 4.
const_assert LPB == 8u && XV == 8u;

//!include quant_x_interleaved.wgsl
//!include quant_x_plain.wgsl
//!include quant_k_scale_dot.wgsl

//!include quant_units_q6_k.wgsl
