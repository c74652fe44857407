  let slot_local = t / LANES;
  let lane = t % LANES;
  let rg = lane % ROW_GROUPS;  // row group
  let slot = group * SLOTS + slot_local;
  let loads = params.k / W_PER_LOAD;  // 16-byte loads per weight row
  // the slot's rows (through the including kernel's w_row); a slot past the end reads a real row and drops
  // its sums
  //!repeat F FT
  let wbase$F = w_row(min(slot + ${F}u * params.slots, params.n - 1u)) * loads;
  //!end
  prepare_epilogue(slot, lane, 0u, params.m);  // the epilogue's own loads, issued before the sums
  var vals: array<f32, VT>;