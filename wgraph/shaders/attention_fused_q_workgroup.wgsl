const Q_SHARED: bool = true;
var<workgroup> qw: array<vec4<f32>, G_TILE * MAX_D / 4u>;
