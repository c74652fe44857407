const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D4: u32 = {{MAX_HEAD_DIM}}u / 4u;
const UNROLL: u32 = 4u;
const_assert MAX_D4 <= WG;
var<workgroup> red: array<f32, WG>;
var<workgroup> sums: array<vec4<f32>, WG>;

// Tree reduction over the workgroup (max or sum); every thread returns the result.
fn reduce(t: u32, x: f32, is_max: bool) -> f32 {
    workgroupBarrier();                           // red's previous contents are read
    red[t] = x;
    for (var half: u32 = WG / 2u; half > 0u; half /= 2u) {
        workgroupBarrier();
        if (t < half) {
            red[t] = select(red[t] + red[t + half], max(red[t], red[t + half]), is_max);
        }
    }
    workgroupBarrier();
    return red[0];
}