    // REDUCE = "scatter" on the shuffle path with LPR >= NV kept each head's running max in m[0] of the lanes
    // holding that head's pairs (lane hh * rep holds head hh's key 0): the merge reads m[hh] in every lane.
    if (LPR <= sg_size && LPR >= U * G_TILE) {
        let rep = LPR / (U * G_TILE);
        let base = sg_lane - lane;
        var mr: array<f32, G_TILE>;
//!repeat hh G_TILE
        mr[$hh] = subgroupShuffle(m[0], base + ${hh}u * rep);
//!end
        m = mr;
    }