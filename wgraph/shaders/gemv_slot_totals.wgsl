// The slot reduction shared by the GEMVs (gemv.wgsl, quant_gemv.wgsl; included after their consts THREADS,
// LANES, SLOTS, FT, MAX_ROWS and a `params.has_norm`): each lane's sums vals[f * MAX_ROWS + r] (dot products,
// then MAX_ROWS sums of x^2 with a norm) added over the slot's LANES lanes into tot[slot_local * V + v]. With
// subgroups (width > 1: lanes of an aligned group of `width` sum by shuffles) one partial per subgroup goes
// through workgroup memory; without, MAX_ROWS values per thread a round.
const V: u32 = (FT + 1u) * MAX_ROWS;  // a lane's sums: vals[f * MAX_ROWS + r] dot products, then MAX_ROWS of x^2
const SG_FLOOR: u32 = 8u;             // narrowest subgroup summed by shuffles (partials per slot <= LANES / 8)
const_assert THREADS % LANES == 0u;
const_assert LANES % SG_FLOOR == 0u;
const_assert 0u == (LANES & (LANES - 1u));

// partials of the slots' lanes: per subgroup (shuffles), or MAX_ROWS values per thread a round (none)
var<workgroup> part: array<f32, max(THREADS * MAX_ROWS, THREADS / SG_FLOOR * V)>;
var<workgroup> tot: array<f32, SLOTS * V>;

// Thread t, lane `lane` of slot `slot_local`: its sums `vals` into tot (every thread of the workgroup calls it:
// it holds barriers); tot is complete for every slot when it returns.
fn slot_totals(t: u32, slot_local: u32, lane: u32, width: u32, vals: ptr<function, array<f32, V>>) {
  if (width > 1u) {
    for (var mask = width / 2u; mask > 0u; mask = mask / 2u) {
      //!repeat I FT * MAX_ROWS
      (*vals)[${I}u] += shuffle_xor((*vals)[${I}u], mask);
      //!end
      if (params.has_norm != 0u) {
        //!repeat R MAX_ROWS
        (*vals)[FT * MAX_ROWS + ${R}u] += shuffle_xor((*vals)[FT * MAX_ROWS + ${R}u], mask);
        //!end
      }
    }
    let subgroups = LANES / width;  // partials per slot
    if (lane % width == 0u) {
      let at = (slot_local * (LANES / SG_FLOOR) + lane / width) * V;
      //!repeat I V
      part[at + ${I}u] = (*vals)[${I}u];
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
    // lane r of a slot sums value r of its LANES lanes (the start lane rotated so neighbouring threads read
    // distinct banks)
    //!repeat F FT + 1
    workgroupBarrier();
    //!repeat R MAX_ROWS
    part[t * MAX_ROWS + ${R}u] = (*vals)[${F}u * MAX_ROWS + ${R}u];
    //!end
    workgroupBarrier();
    if (lane < MAX_ROWS) {
      var s = 0.0;
      for (var l = 0u; l < LANES; l = l + 1u) {
        s += part[(slot_local * LANES + (l + lane) % LANES) * MAX_ROWS + lane];
      }
      tot[slot_local * V + ${F}u * MAX_ROWS + lane] = s;
    }
    //!end
  }
  workgroupBarrier();
}
