//!include bf16.wgsl
// Element i of a bf16 embedding table (u32 words of two elements), widened to f32.
fn table_at(i: u32) -> f32 {
  return bf16_get(table[i >> 1u], i);
}
