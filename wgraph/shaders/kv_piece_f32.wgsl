// One 16-byte piece of an f32 K/V row as vec4<f32>s: one vec4 per piece (a variant picks it with its KV_PIECE define).
const PV4: u32 = 1u;  // vec4<f32>s in one 16-byte piece

fn piece(w: vec4<u32>, e: u32) -> vec4<f32> {
    return bitcast<vec4<f32>>(w);
}

// Four dims of a piece (its one unit), as the staged decode holds K/V in workgroup memory.
alias KvUnit = vec4<u32>;

fn unit_of(w: vec4<u32>, e: u32) -> KvUnit {
    return w;
}

fn unit_f32(u: KvUnit) -> vec4<f32> {
    return bitcast<vec4<f32>>(u);
}
