// Functions the elementwise table's expressions may call (f32 in, f32 out).

// exp(y) = 2^k exp(y - k ln 2) with k = round(y / ln 2) and ln 2 split in two (Cody and Waite, as Cephes'
// expf: k * 0.693359375 is exact), so the builtin exp only sees |r| <= ln(2) / 2: WGSL allows exp an error
// of 3 + 2|y| ulp, and lavapipe's reaches ~150 ulp at y = -80. y is clamped to [-103, 88.5] (ldexp's range;
// beyond, the f32 result is 0 or overflows).
fn exp_reduced(y_in: f32) -> f32 {
  let y = clamp(y_in, -103.0, 88.5);
  let k = round(y * 1.44269504088896341);
  let r = (y - k * 0.693359375) + k * 2.12194440e-4;
  return ldexp(exp(r), i32(k));
}

fn sigmoid(y: f32) -> f32 {
  return select(1.0 / (1.0 + exp_reduced(-y)), 0.0, y < -88.0);
}

// x * sigmoid(y). Below y = -87, sigmoid(y) is subnormal (0 below its cut at -88) while x * sigmoid(y) can still be a
// normal f32 (silu(-89) = -1.98e-37 and the tanh form's gelu(-10.05) = -3.9e-38 came out -0): there 1 + e^y is 1 in
// f32, so x sigmoid(y) = x e^y = (x e^r) 2^k, formed at a normal scale and scaled down last (2^(k + 64) keeps
// ldexp's exponent normal; the exact * 2^-64 rounds once). An infinite or NaN y keeps the formula's answer
// (silu(-inf) = -inf * 0 = NaN): the tail branch takes finite y only.
fn x_sigmoid(x: f32, y: f32) -> f32 {
  let yc = clamp(y, -150.0, -87.0);
  let k = round(yc * 1.44269504088896341);
  let r = (yc - k * 0.693359375) + k * 2.12194440e-4;
  let tail = ldexp(x * exp(r), i32(k) + 64) * 5.42101086242752217e-20;
  return select(x * sigmoid(y), tail, y < -87.0 && y >= -150.0);
}

fn silu(x: f32) -> f32 {
  return x_sigmoid(x, x);
}

// Phi(x) = P(N(0, 1) <= x) = erfc(-x / sqrt 2) / 2; WGSL has no erf. Numerical Recipes' erfcc,
// erfc(z) = t * exp(-z^2 + P(t)) with t = 1 / (1 + z / 2), has a fractional error below 1.2e-7 for z >= 0,
// and erfc(-z) = 2 - erfc(z). exp(-z^2) = exp(-x^2 / 2) is taken from x itself (z = x / sqrt 2 rounded in
// f32 would cost 2 z^2 * 6e-8 relative) as exp(-h^2 / 2) * exp((h - |x|)(h + |x|) / 2) with h = |x|
// rounded down to 1/256, whose square is exact in f32, and exp(-h^2 / 2) by exp_reduced. Relative accuracy
// then holds in the tail (x << 0), where 1 + erf(x / sqrt 2) would cancel: within 6 f32 ulp on lavapipe.
fn normal_cdf(x: f32) -> f32 {
  // Phi(-15) = 3.7e-51 comes out as exactly 0 (Phi(-14) = 7.8e-45 is a subnormal f32 keeps: clamped there,
  // gelu(-3e38) was -2.5e-6 and gelu(-inf) -inf); x * Phi(x) is 0 in f32 below x ~ -14.4 anyway
  let a = min(abs(x), 15.0);
  let t = 1.0 / (1.0 + 0.35355339059327376 * a);
  var p = t * 0.17087277 - 0.82215223;
  p = t * p + 1.48851587;
  p = t * p - 1.13520398;
  p = t * p + 0.27886807;
  p = t * p - 0.18628806;
  p = t * p + 0.09678418;
  p = t * p + 0.37409196;
  p = t * p + 1.00002368;
  p = t * p - 1.26551223;
  let h = floor(a * 256.0) / 256.0;
  let tail = 0.5 * t * exp(0.5 * (h - a) * (h + a) + p) * exp_reduced(-0.5 * h * h);  // Phi(-|x|)
  return select(tail, 1.0 - tail, x > 0.0);
}

// 0.5 x (1 + tanh(u)) written as x * sigmoid(2u), u = sqrt(2 / pi) (x + 0.044715 x^3): the tanh form of GELU
// without its cancellation at x << 0.
fn gelu_tanh(x: f32) -> f32 {
  return x_sigmoid(x, 1.5957691216057307 * (x + 0.044715 * x * x * x));
}

//!include tanh_small.wgsl
//!include is_nan.wgsl

// tanh to a few ulp: tanh_small below |x| = 0.625, else 1 - 2 / (e^2|x| + 1) with the sign of x (e^2|x| may
// overflow to inf: the result is then exactly +-1). WGSL's builtin tanh overflows past |x| ~ 44. NaN is
// returned as it came: sign(NaN) is 0 on lavapipe (softcap(NaN) was 0).
fn tanh_accurate(x: f32) -> f32 {
  if (is_nan_f32(x)) {
    return x;
  }
  let a = abs(x);
  if (a < 0.625) {
    return tanh_small(x);
  }
  return sign(x) * (1.0 - 2.0 / (exp_reduced(2.0 * min(a, 44.0)) + 1.0));
}
