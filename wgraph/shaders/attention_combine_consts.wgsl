const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D4: u32 = {{MAX_HEAD_DIM}}u / 4u;
const UNROLL: u32 = 4u;
const_assert MAX_D4 <= WG;
var<workgroup> red: array<vec2<f32>, WG>;
var<workgroup> sums: array<vec4<f32>, WG>;

// Two softmax states (max m, sum l of exp(s - m)) as one.
fn merge_ml(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let m = max(a.x, b.x);
    return vec2<f32>(m, a.y * exp(a.x - m) + b.y * exp(b.x - m));
}

// Tree reduction of the threads' softmax states; every thread returns the merged state.
fn reduce_ml(t: u32, x: vec2<f32>) -> vec2<f32> {
    workgroupBarrier();                           // red's previous contents are read
    red[t] = x;
    for (var half: u32 = WG / 2u; half > 0u; half /= 2u) {
        workgroupBarrier();
        if (t < half) {
            red[t] = merge_ml(red[t], red[t + half]);
        }
    }
    workgroupBarrier();
    return red[0];
}