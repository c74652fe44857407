const Q_SHARED: bool = false;
var<private> qw: array<vec4<f32>, 1>;   // never read (the steps read qr): no workgroup memory
