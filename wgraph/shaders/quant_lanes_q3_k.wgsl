// Q3_K lanes for quant_gemv.wgsl: 110-byte super-blocks of 256 weights: hmask (32 bytes: each weight's third
// bit), qs (64: its low 2 bits), 12 bytes of 6-bit scales (16, one a 16 weights), f16 d; w = d * (scale - 32) *
// (q - 4). Half n of a block (weights 128n ..): qs byte 32n + l holds weights 128n + 32j + l in bits 2j, 2j + 1
// (j = 0..3), hmask byte l their third bits at bit 4n + j. Lane t of a block's 8 takes l = 4t .. 4t + 3: qs word
// 8n + t of each half and hmask word t; value vector i = 4n + j multiplies x vector t + 8i (neighbours across
// the lanes: quant_x_interleaved.wgsl), under scale 8n + 2j + t / 4. 110 bytes: an odd block starts 2 bytes
// into a word, so each field is read as Q6_K's reader reads its fields (quant_bytes4.wgsl).
const_assert LPB == 8u && XV == 8u;

//!include quant_x_interleaved.wgsl
//!include quant_x_plain.wgsl
//!include quant_k_scale_dot.wgsl

//!include quant_units_q3_k.wgsl
