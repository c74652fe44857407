// Element i of the embedding table as an OUT_T (the table's own type, or f32 from f16).
fn table_at(i: u32) -> {{OUT_T}} {
  return {{OUT_T}}(table[i]);
}
