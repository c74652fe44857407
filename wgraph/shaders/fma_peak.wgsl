// The ALU ceiling: every thread runs CHAINS independent chains a = fma(a, mul, add) of type T (f32, f16,
// vec2<f16>, vec4<f16>), UNROLL steps per loop iteration, `iterations` iterations. mul, add and the start
// values come from a buffer and the iteration count from a uniform, and every chain ends in `out`, so the
// compiler can neither fold nor drop any of them. FMAs per thread: iterations * UNROLL * CHAINS * LANES.
{{ENABLE}}
struct FmaParams {
  iterations: u32,
}

@group(0) @binding(0) var<uniform> params: FmaParams;
@group(0) @binding(1) var<storage, read> seed: array<f32>;  // start, mul, add, per-thread start step
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

alias T = {{T}};
const CHAINS: u32 = 8u;
const UNROLL: u32 = 32u;  // 256 fma() per loop iteration: the loop's own instructions are noise

fn splat(v: f32) -> T {
  return T({{ELEM}}(v));
}

fn total(v: T) -> f32 {
  return f32({{TOTAL}});
}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let i = (wid.x + wid.y * groups.x) * {{WORKGROUP_SIZE_X}}u + t;
  let mul = splat(seed[1]);
  let add = splat(seed[2]);
  let start = seed[0] + f32(i % 64u) * seed[3];
  //!repeat C CHAINS
  var a$C = splat(start + f32($C) * seed[3]);
  //!end
  for (var it = 0u; it < params.iterations; it = it + 1u) {
    //!repeat U UNROLL
    //!repeat C CHAINS
    a$C = fma(a$C, mul, add);
    //!end
    //!end
  }
  var s = 0.0;
  //!repeat C CHAINS
  s = s + total(a$C);
  //!end
  out[i] = s;
}
