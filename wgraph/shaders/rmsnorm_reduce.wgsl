  partial[lid.x] = s;
  workgroupBarrier();
  for (var stride = {{WORKGROUP_SIZE_X}}u / 2u; stride > 0u; stride = stride / 2u) {
    if (lid.x < stride) {
      partial[lid.x] = partial[lid.x] + partial[lid.x + stride];
    }
    workgroupBarrier();
  }
  let inv = inverseSqrt(partial[0] / f32(params.dim) + params.eps);