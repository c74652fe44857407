const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const BLOCK_M: u32 = {{BLOCK_M}}u;
const TPQ: u32 = {{THREADS_PER_QUERY}}u;
const R: u32 = {{ROWS_PER_THREAD}}u;
const ROW_STEP: u32 = {{BLOCK_M}}u / {{ROWS_PER_THREAD}}u;   // a thread's rows are ROW_STEP apart
const TILE_N: u32 = {{TILE_N}}u;
const ROW4: u32 = {{MAX_HEAD_DIM}}u / 4u;          // vec4s in one padded K/V row
const DPT4: u32 = {{MAX_HEAD_DIM}}u / 4u / {{THREADS_PER_QUERY}}u;  // vec4s of head dims per thread
const TILE4: u32 = {{TILE_N}}u * ROW4;
// The registry's workgroup size and tile shape must agree: one thread per (row group, dim slice).
const_assert WG == ROW_STEP * TPQ;
const_assert TPQ <= 4u;

var<workgroup> k_tile: array<vec4<f32>, TILE4>;
var<workgroup> v_tile: array<vec4<f32>, TILE4>;   // f32 whatever K/V's dtype: widened once, at the load