// c = EXPR(a, b) elementwise: the template every binary op of wgraph/ops/elementwise.py's table fills. EXPR is
// f32 math over `va` and `vb` (the elements, widened to f32); the result is stored as T.
// Output element i sits at (row, col) = (i / cols, i % cols) and reads a[row * a_stride + a_offset + col] and
// b[row * b_stride + b_offset + col]: equal shapes, a broadcast trailing-dims b (b_stride 0) and the two
// halves of one tensor's last dim (swiglu) are all this one indexing.
{{ENABLE}}
//!include elementwise_math.wgsl

struct BinaryParams {
  n: u32,
  cols: u32,
  a_stride: u32,
  a_offset: u32,
  b_stride: u32,
  b_offset: u32,
}

@group(0) @binding(0) var<uniform> params: BinaryParams;
@group(0) @binding(1) var<storage, read> a: array<{{T}}>;
@group(0) @binding(2) var<storage, read> b: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> c: array<{{T}}>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * {{WORKGROUP_SIZE_X}}u;
  if (i >= params.n) {
    return;
  }
  let row = i / params.cols;
  let col = i % params.cols;
  let va = f32(a[row * params.a_stride + params.a_offset + col]);
  let vb = f32(b[row * params.b_stride + params.b_offset + col]);
  c[i] = {{T}}({{EXPR}});
}
