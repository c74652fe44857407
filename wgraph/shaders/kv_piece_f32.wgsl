// One 16-byte piece of an f32 K/V row as vec4<f32>s: one vec4 per piece (a variant picks it with its KV_PIECE define).
const PV4: u32 = 1u;  // vec4<f32>s in one 16-byte piece

fn piece(w: vec4<u32>, e: u32) -> vec4<f32> {
    return bitcast<vec4<f32>>(w);
}
