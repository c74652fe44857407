// acc + s * v, one fma a component with the scalar s as an operand: the same sums as fma(vec4(s), v, acc), whose
// splat vec4(s) NVIDIA's compiler kept as MOVs (259 MOV beside 512 FFMA in the GEMM-shaped prefill's P.V loop,
// benchmarks/results/h100-prefill-decode-sass-1206.log): issue slots the FMAs wait behind. The P.V sums of
// attention_gemm_body.wgsl and the register tiles of linear_gemm.wgsl.
fn fma_scaled(s: f32, v: vec4<f32>, acc: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(fma(s, v.x, acc.x), fma(s, v.y, acc.y), fma(s, v.z, acc.z), fma(s, v.w, acc.w));
}
