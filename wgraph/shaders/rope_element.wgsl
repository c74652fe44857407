// One element of the rotary embedding of x [rows, heads, dim] (included by rope.wgsl and rope_bf16.wgsl, which
// define x_at). Dims j >= 2 * half (past rotary_dim) pass through; the rotary dims turn in pairs, (i, i + half)
// (rotate-half, as Llama) or (2i, 2i + 1) (interleaved, GPT-J), pair i by the angle of table column i at the
// row's position p = pos + row (+ pos_buf[0] when use_pos_buf: a recorded decode step reads it from the GPU):
//   y[a] = x[a] c - x[b] s,  y[b] = x[b] c + x[a] s.
// A position beyond the table makes the row zeros (never stale data); a GPU one is also reported on the device
// error flag.
fn rope_element(e: u32) -> f32 {
  let j = e % params.dim;
  let rh = e / params.dim;          // row * heads + head
  let p0 = params.pos + rh / params.heads;  // the host checks an int pos; pos + rows fits in u32
  var p = p0;
  var beyond = p0 >= params.table_rows;
  if (params.use_pos_buf != 0u) {
    // Compared without adding, so a GPU position near 2^32 cannot wrap round to a row of the table.
    let g = pos_buf[0];
    beyond = beyond || g >= params.table_rows - p0;
    if (beyond) {
      report_error(ERR_ROPE_POS, select(p0 + g, 0xFFFFFFFFu, g > 0xFFFFFFFFu - p0), params.table_rows);
    }
    p = p0 + g;
  }
  if (beyond) {
    return 0.0;
  }
  if (j >= 2u * params.half) {
    return x_at(e);
  }
  var i = j / 2u;
  var a = j & ~1u;
  var b = a + 1u;
  if (params.interleaved == 0u) {
    i = select(j, j - params.half, j >= params.half);
    a = i;
    b = i + params.half;
  }
  let c = f32(cos_t[p * params.half + i]);
  let s = f32(sin_t[p * params.half + i]);
  let xa = x_at(e - j + a);
  let xb = x_at(e - j + b);
  return select(xb * c + xa * s, xa * c - xb * s, j == a);
}
