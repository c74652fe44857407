// The slot reduction shared by the GEMVs (gemv.wgsl, quant_gemv.wgsl; included after their consts THREADS,
// LANES, SLOTS, FT, MAX_ROWS, ROW_GROUPS and HAS_NORM): each thread's sums vals[f * RPG + i] (dot
// products of rows g * RPG + i of x, g = its row group lane % ROW_GROUPS; then RPG sums of x^2 with a norm)
// added over the slot's LANES / ROW_GROUPS threads of its group into tot[slot_local * V + f * MAX_ROWS + r].
// With subgroups (width > 1: lanes of an aligned group of `width` sum by shuffles) one partial per subgroup and
// row group goes through workgroup memory; without, MAX_ROWS values per thread a round.
const RPG: u32 = MAX_ROWS / ROW_GROUPS;  // rows of x a thread takes
const V: u32 = (FT + 1u) * MAX_ROWS;     // a slot's sums: tot[f * MAX_ROWS + r] dot products, then MAX_ROWS of x^2
const VT: u32 = (FT + 1u) * RPG;         // a thread's sums
const SG_FLOOR: u32 = 8u;                // narrowest subgroup summed by shuffles (partials per slot <= LANES / 8)
const_assert THREADS % LANES == 0u;
const_assert LANES % SG_FLOOR == 0u;
const_assert 0u == (LANES & (LANES - 1u));
const_assert MAX_ROWS % ROW_GROUPS == 0u;
const_assert 0u == (ROW_GROUPS & (ROW_GROUPS - 1u));
const_assert ROW_GROUPS <= SG_FLOOR;     // a subgroup holds every row group

// partials of the slots' lanes: per subgroup (shuffles), or MAX_ROWS values per thread a round (none)
var<workgroup> part: array<f32, max(THREADS * MAX_ROWS, THREADS / SG_FLOOR * V)>;
var<workgroup> tot: array<f32, SLOTS * V>;

// Thread t, lane `lane` of slot `slot_local`: its sums `vals` into tot (every thread of the workgroup calls it:
// it holds barriers); tot is complete for every slot when it returns.
fn slot_totals(t: u32, slot_local: u32, lane: u32, width: u32, vals: ptr<function, array<f32, VT>>) {
  let rg = lane % ROW_GROUPS;
  if (width > 1u) {
    // shuffles across lanes of one row group (masks >= ROW_GROUPS keep lane % ROW_GROUPS)
    for (var mask = width / 2u; mask >= ROW_GROUPS; mask = mask / 2u) {
      //!repeat I FT * RPG
      (*vals)[${I}u] += shuffle_xor((*vals)[${I}u], mask);
      //!end
      if (HAS_NORM) {
        //!repeat R RPG
        (*vals)[FT * RPG + ${R}u] += shuffle_xor((*vals)[FT * RPG + ${R}u], mask);
        //!end
      }
    }
    let subgroups = LANES / width;  // partials per slot, each with every row group's rows
    if (lane % width < ROW_GROUPS) {
      let at = (slot_local * (LANES / SG_FLOOR) + lane / width) * V + rg * RPG;
      //!repeat F FT + 1
      //!repeat R RPG
      part[at + ${F}u * MAX_ROWS + ${R}u] = (*vals)[${F}u * RPG + ${R}u];
      //!end
      //!end
    }
    workgroupBarrier();
    for (var v = lane; v < V; v = v + LANES) {
      var s = 0.0;
      for (var p = 0u; p < subgroups; p = p + 1u) {
        s += part[(slot_local * (LANES / SG_FLOOR) + p) * V + v];
      }
      tot[slot_local * V + v] = s;
    }
  } else {
    // lane r of a slot sums value r over the K-lanes of r's row group (the start rotated so neighbouring
    // threads read distinct banks)
    //!repeat F FT + 1
    workgroupBarrier();
    //!repeat R RPG
    part[t * MAX_ROWS + rg * RPG + ${R}u] = (*vals)[${F}u * RPG + ${R}u];
    //!end
    workgroupBarrier();
    if (lane < MAX_ROWS) {
      var s = 0.0;
      for (var l = 0u; l < LANES / ROW_GROUPS; l = l + 1u) {
        let src = ((l + lane) % (LANES / ROW_GROUPS)) * ROW_GROUPS + lane / RPG;
        s += part[(slot_local * LANES + src) * MAX_ROWS + lane];
      }
      tot[slot_local * V + ${F}u * MAX_ROWS + lane] = s;
    }
    //!end
  }
  workgroupBarrier();
}
