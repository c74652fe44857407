// The second pass of a split-K GEMM (linear_gemm.wgsl): the sum over splits z of parts[z * part_size + j]
// (+ bias[j % n]) for the GEMM's output j, then what the GEMV fuses in its epilogue and the GEMM would run as
// dispatches of their own: with swiglu, output i of row r is silu(gate) * up of the row's halves [gate | up]
// (n / 2 outputs a row); with a residual, y[i] += residual[i]. One output per thread.
//!include elementwise_math.wgsl

struct GemmSumParams {
  outputs: u32,    // y's elements: m * n, or m * n / 2 with swiglu
  n: u32,          // the GEMM's features (a row of a part)
  part_size: u32,  // m * n
  splits: u32,
  has_bias: u32,
  swiglu: u32,
  has_residual: u32,
}

@group(0) @binding(0) var<uniform> params: GemmSumParams;
@group(0) @binding(1) var<storage, read> parts: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> residual: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

// output j of the GEMM (row-major [m, n]): its K slices summed, plus the bias
fn total(j: u32) -> f32 {
  var s = 0.0;
  for (var z = 0u; z < params.splits; z = z + 1u) {
    s = s + parts[z * params.part_size + j];
  }
  if (params.has_bias != 0u) {
    s = s + bias[j % params.n];
  }
  return s;
}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let i = (wid.x + wid.y * groups.x) * {{WORKGROUP_SIZE_X}}u + t;
  if (i >= params.outputs) {
    return;
  }
  var v: f32;
  if (params.swiglu != 0u) {
    let half = params.n / 2u;
    let j = (i / half) * params.n + i % half;  // the gate's output; the up's is half further
    v = silu(total(j)) * total(j + half);
  } else {
    v = total(i);
  }
  if (params.has_residual != 0u) {
    v = v + residual[i];
  }
  y[i] = v;
}
