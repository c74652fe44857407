    let LPR = D / ELEMS;                         // lanes per key
    let KS = WG / LPR;                           // key slots
    let slot = t / LPR;
    let lane = t % LPR;
    let in_slot = slot < KS;
    let pairs = KS * U * G_TILE;
    let pstride = pairs + 1u;
    let row_stride = params.num_kv_heads * LPR; // pieces from one kv row to the next

    // q pieces of the block's heads, in registers for the scores phase.
    var qr: array<vec4<f32>, G_TILE * PV4>;