// The quantized GEMV's uniform fields (quant_gemv_core.wgsl reads them), included in the params struct of each
// kernel built on that core: quant_gemv.wgsl's QuantGemvParams, quant_gemv_rope_kv.wgsl's (one flat struct).
  m: u32,                 // rows of x (all chunks)
  n: u32,                 // rows of W
  k: u32,                 // in_features: row_blocks whole blocks
  row_blocks: u32,        // blocks per weight row
  slots: u32,             // feature slots: ceil(n / FT), n / FT with swiglu
  out_n: u32,             // output features: n, or n / 2 with swiglu
  groups_per_chunk: u32,  // workgroups per chunk of MAX_ROWS rows of x
  has_bias: u32,
  has_residual: u32,
  swiglu: u32,
  eps: f32,
