// The GEMV's uniform fields (gemv_core.wgsl reads them), included in the params struct of each kernel built on
// the GEMV core: gemv.wgsl's GemvParams, gemv_rope_kv.wgsl's (one flat struct: uniforms pack one by name).
  m: u32,             // rows of x this pass reads (<= MAX_ROWS)
  row0: u32,          // the first of them (and of y's rows): a call of more rows runs passes of MAX_ROWS (0: one pass)
  n: u32,             // rows of W
  k: u32,             // in_features (a multiple of W_PER_LOAD)
  slots: u32,         // feature slots: ceil(n / FT), n / FT with swiglu
  out_n: u32,         // output features: n, or n / 2 with swiglu
  has_bias: u32,
  has_residual: u32,
  swiglu: u32,
  eps: f32,
