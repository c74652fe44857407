// One 16-byte piece of an f16 K/V row as vec4<f32>s: eight halves, two vec4s, widened with unpack2x16float
// (no shader-f16 needed to read f16 data this way). A variant picks it with its KV_PIECE define.
const PV4: u32 = 2u;  // vec4<f32>s in one 16-byte piece

fn piece(w: vec4<u32>, e: u32) -> vec4<f32> {
    return select(vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)), vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)), e == 0u);
}
