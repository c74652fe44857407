    // A slot's LPR lanes are neighbours in one subgroup, whatever order the device numbers subgroups.
    let t = sg * sg_size + sg_lane;
    let LPR = D / DPL;                            // lanes per key row (a power of two <= subgroup size)
    let KS = WG / LPR;                            // slots
    let slot = t / LPR;
    let lane = t % LPR;
    let row_stride = params.num_kv_heads * (D / ELEMS);   // pieces from one kv row to the next
    let col = g * (D / ELEMS) + lane;             // the lane's first piece in a row; piece p at col + p * LPR

    // q dims of the block's heads: qr[(hh * PPL + p) * PV4 + e] = dims (p * LPR + lane) * ELEMS + 4e .. + 3
    var qr: array<vec4<f32>, Q4>;