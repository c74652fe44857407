    let h = wid.x;
    let b = wid.y;
    let sq = seq_q(b);
    let sk = seq_k(b);
    enter_seq(b, sk.x);
    let S = sq.y;
    let i0 = (nwg.z - 1u - wid.z) * BLOCK_M;
    if (i0 >= S) {
        return;                          // the whole workgroup: past this sequence's queries
    }