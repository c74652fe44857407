// y = EXPR(x) elementwise: the template every unary op of wgraph/ops/elementwise.py's table fills. EXPR is
// f32 math over `v` (the element, widened to f32) and the uniform `alpha`; the result is stored as T.
// The flat index spans a 2D grid so large tensors fit the workgroup limit.
{{ENABLE}}
//!include elementwise_math.wgsl

struct UnaryParams {
  n: u32,
  alpha: f32,
}

@group(0) @binding(0) var<uniform> params: UnaryParams;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> y: array<{{T}}>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  if (i >= params.n) {
    return;
  }
  let v = f32(x[i]);
  let alpha = params.alpha;
  y[i] = {{T}}({{EXPR}});
}
