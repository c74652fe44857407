// rope_kv_pair.wgsl's uniform fields (and kv_common.wgsl's), included in the params struct of each kernel that
// writes RoPE'd q and the K/V append by rope_kv_write: rope_kv_append.wgsl, gemv_rope_kv.wgsl,
// quant_gemv_rope_kv.wgsl.
  n_rows: u32,
  q_heads: u32,
  kv_heads: u32,
  half: u32,
  table_rows: u32,
  capacity: u32,
  dst_layout: u32,
  page_size: u32,
  pos: i32,
  use_pos_buf: u32,
  src_layout: u32,  // read by kv_common's kv_rows: 0, the rows of qkv in order
  src_ring: u32,
  src_row0: u32,
