    // REDUCE = "scatter"'s own-pair paths kept the running max of the lane's C heads in m[0 .. C - 1] (head hh's
    // in lane (hh / C) * rep, m[hh % C]): the merge reads m[hh] in every lane.
    if (LPR <= sg_size && max(U * G_TILE / LPR, 1u) <= G_TILE) {
        let rep = max(LPR / (U * G_TILE), 1u);
        let base = sg_lane - lane;
        var mr: array<f32, G_TILE>;
//!repeat cc SC_PATHS
        if (max(U * G_TILE / LPR, 1u) == (1u << ${cc}u)) {   // C = 2^cc (the steps' SC_C consts are out of scope)
//!repeat hh G_TILE
            mr[$hh] = subgroupShuffle(m[${hh}u % (1u << ${cc}u)], base + (${hh}u / (1u << ${cc}u)) * rep);
//!end
        }
//!end
        m = mr;
    }