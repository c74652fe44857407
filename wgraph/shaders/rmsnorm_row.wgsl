  let row = wid.x + wid.y * groups.x;
  if (row >= params.rows) {
    return;
  }
  let base = row * params.dim;
  var s = 0.0;