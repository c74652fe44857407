// The slot reduction shared by the GEMVs (gemv.wgsl, quant_gemv.wgsl; included after their consts THREADS,
// LANES, SLOTS, FT, MAX_ROWS, ROW_GROUPS, INTERLEAVE and HAS_NORM): each thread's sums vals[f * RPG + i] (dot
// products of rows g * RPG + i of x, g = its row group lane % ROW_GROUPS; then RPG sums of x^2 with a norm)
// added over the slot's LANES / ROW_GROUPS threads of its group into tot[slot_local * V + f * MAX_ROWS + r].
// With subgroups (width > 1: lanes of an aligned group of `width` sum by shuffles) one partial per subgroup and
// row group goes through workgroup memory; without, MAX_ROWS values per thread a round. Lane l of a slot is
// thread l * INTERLEAVE of its block (gemv_core.wgsl), so a shuffle between lanes l and l ^ m pairs threads
// m * INTERLEAVE apart, and a subgroup of s threads holds s / INTERLEAVE lanes of each of INTERLEAVE slots.
const RPG: u32 = MAX_ROWS / ROW_GROUPS;  // rows of x a thread takes
const V: u32 = (FT + 1u) * MAX_ROWS;     // a slot's sums: tot[f * MAX_ROWS + r] dot products, then MAX_ROWS of x^2
const VT: u32 = (FT + 1u) * RPG;         // a thread's sums
const SG_FLOOR: u32 = 8u;                // narrowest subgroup summed by shuffles
// partials per slot through workgroup memory with subgroups: a subgroup of >= SG_FLOOR threads holds at least
// SG_FLOOR / INTERLEAVE lanes of a slot (LANES / SG_FLOOR without interleaving)
const PARTIALS: u32 = max(1u, LANES * INTERLEAVE / SG_FLOOR);
const_assert THREADS % (LANES * INTERLEAVE) == 0u;  // whole blocks of INTERLEAVE slots
const_assert LANES * INTERLEAVE % SG_FLOOR == 0u;  // a block is whole subgroups, or one subgroup holds whole blocks
const_assert 0u == (LANES & (LANES - 1u));
const_assert MAX_ROWS % ROW_GROUPS == 0u;
const_assert 0u == (ROW_GROUPS & (ROW_GROUPS - 1u));
const_assert LANES % ROW_GROUPS == 0u;
const_assert 0u == (INTERLEAVE & (INTERLEAVE - 1u));
const_assert ROW_GROUPS * INTERLEAVE <= SG_FLOOR;  // a subgroup holds every row group of each of its slots

// partials of the slots' lanes: per subgroup (shuffles), or MAX_ROWS values per thread a round (none)
var<workgroup> part: array<f32, max(THREADS * MAX_ROWS, SLOTS * PARTIALS * V)>;
var<workgroup> tot: array<f32, SLOTS * V>;

// Thread t, lane `lane` of slot `slot_local`: its sums `vals` into tot (every thread of the workgroup calls it:
// it holds barriers); tot is complete for every slot when it returns.
fn slot_totals(t: u32, slot_local: u32, lane: u32, width: u32, vals: ptr<function, array<f32, VT>>) {
  let rg = lane % ROW_GROUPS;
  if (width > 1u) {
    // shuffles across lanes of one row group (masks >= ROW_GROUPS keep lane % ROW_GROUPS), in threads
    // INTERLEAVE times the lanes apart
    for (var mask = width / 2u; mask >= ROW_GROUPS; mask = mask / 2u) {
      //!repeat I FT * RPG
      (*vals)[${I}u] += shuffle_xor((*vals)[${I}u], mask * INTERLEAVE);
      //!end
      if (HAS_NORM) {
        //!repeat R RPG
        (*vals)[FT * RPG + ${R}u] += shuffle_xor((*vals)[FT * RPG + ${R}u], mask * INTERLEAVE);
        //!end
      }
    }
    let subgroups = LANES / width;  // partials per slot, each with every row group's rows
    if (lane % width < ROW_GROUPS) {
      let at = (slot_local * PARTIALS + lane / width) * V + rg * RPG;
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
        s += part[(slot_local * PARTIALS + p) * V + v];
      }
      tot[slot_local * V + v] = s;
    }
  } else {
    // lanes r, r + LANES, .. of a slot sum value r over the K-lanes of r's row group (the start rotated so
    // neighbouring threads read distinct banks); a thread's partials sit at its lane's place (slot_local *
    // LANES + lane: t without interleaving)
    //!repeat F FT + 1
    workgroupBarrier();
    //!repeat R RPG
    part[(slot_local * LANES + lane) * MAX_ROWS + rg * RPG + ${R}u] = (*vals)[${F}u * RPG + ${R}u];
    //!end
    workgroupBarrier();
    for (var r = lane; r < MAX_ROWS; r = r + LANES) {
      var s = 0.0;
      for (var l = 0u; l < LANES / ROW_GROUPS; l = l + 1u) {
        let src = ((l + r) % (LANES / ROW_GROUPS)) * ROW_GROUPS + r / RPG;
        s += part[(slot_local * LANES + src) * MAX_ROWS + r];
      }
      tot[slot_local * V + ${F}u * MAX_ROWS + r] = s;
    }
    //!end
  }
  workgroupBarrier();
}
