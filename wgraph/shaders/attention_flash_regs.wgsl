    // The TPQ lanes of a row group are neighbours in one subgroup, whatever order the device numbers them.
    let vt = sg * sg_size + lane;
    let row0 = vt / TPQ;                 // the thread's rows: row0 + r * ROW_STEP, r < R
    let part = vt % TPQ;

    // Every index into these arrays is a constant after //!repeat: they stay in registers.
    // Row r's values sit at [r * DPT4 + n] (q, o) and [r * TILE_N + kk] (scores).
    var qr: array<vec4<f32>, {{ROWS_PER_THREAD}}u * DPT4>;
    var o: array<vec4<f32>, {{ROWS_PER_THREAD}}u * DPT4>;
    var s: array<f32, {{ROWS_PER_THREAD}}u * TILE_N>;
    var ob: array<u32, {{ROWS_PER_THREAD}}>;
    var ok: array<bool, {{ROWS_PER_THREAD}}>;
    var r_lo: array<u32, {{ROWS_PER_THREAD}}>;
    var r_hi: array<u32, {{ROWS_PER_THREAD}}>;
    var m: array<f32, {{ROWS_PER_THREAD}}>;
    var l: array<f32, {{ROWS_PER_THREAD}}>;
    var poisoned: array<bool, {{ROWS_PER_THREAD}}>;  // a visible score was NaN: the row's output is NaN
    var poison: array<f32, {{ROWS_PER_THREAD}}>;     // that NaN (WGSL has no NaN constant)