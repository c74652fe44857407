    let h0 = g * group + blk * G_TILE;
    let ng = min(G_TILE, group - blk * G_TILE);
    let sq = seq_q(b);
    let sk = seq_k(b);
    enter_seq(b, sk.x);
    if (sq.y == 0u) {
        return;
    }
    let range = visible(sq.y - 1u, sq.y, sk.y);  // the one query of the step: the sequence's last