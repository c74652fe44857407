// tanh(x) for |x| < 0.625 to a few ulp: Cephes' tanhf polynomial. There 1 - 2 / (e^2x + 1) cancels, and
// WGSL's builtin tanh inherits sinh / cosh, whose error near 0 is not relative (lavapipe's: 0.34 absolute on a
// softcap of 1e7's scores); past 0.625 the builtin and the exp form are accurate.
fn tanh_small(x: f32) -> f32 {
  let z = x * x;
  let p = (((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z + 1.33314422036e-1) * z
          - 3.33332819422e-1;
  return x + x * z * p;
}
