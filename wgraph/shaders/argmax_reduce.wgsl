  best_v[lid.x] = v;
  best_i[lid.x] = vi;
  workgroupBarrier();
  for (var s = {{WORKGROUP_SIZE_X}}u / 2u; s > 0u; s = s / 2u) {
    if (lid.x < s && beats(best_v[lid.x + s], best_i[lid.x + s], best_v[lid.x], best_i[lid.x])) {
      best_v[lid.x] = best_v[lid.x + s];
      best_i[lid.x] = best_i[lid.x + s];
    }
    workgroupBarrier();
  }