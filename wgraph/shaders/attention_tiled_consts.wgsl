const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const BLOCK_M: u32 = {{BLOCK_M}}u;
const TILE_N: u32 = {{TILE_N}}u;
const MAX_D: u32 = {{MAX_HEAD_DIM}}u;
const TPQ: u32 = WG / BLOCK_M;
const DIMS_PER_THREAD: u32 = (MAX_D + TPQ - 1u) / TPQ;
const KV_TILE: u32 = {{TILE_N}}u * {{MAX_HEAD_DIM}}u;
const S_TILE: u32 = {{BLOCK_M}}u * {{TILE_N}}u;

var<workgroup> k_tile: array<f32, KV_TILE>;
var<workgroup> v_tile: array<f32, KV_TILE>;
var<workgroup> s_tile: array<f32, S_TILE>;