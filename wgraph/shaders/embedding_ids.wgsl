  let t = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  if (t >= params.n) {
    return;
  }
  let s = t / params.hidden;
  let h = t % params.hidden;
  let id = ids[s];