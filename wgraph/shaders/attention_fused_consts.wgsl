const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D: u32 = {{MAX_HEAD_DIM}}u;
const U: u32 = {{KEYS_PER_THREAD}}u;          // keys a slot takes per step
//!include {{KV_PIECE}}
const ELEMS: u32 = 4u * PV4;                  // head dims in one piece
const DPL: u32 = {{DIMS_PER_LANE}}u;          // head dims a lane owns
const PPL: u32 = DPL / ELEMS;                 // pieces a lane loads per key row
const Q4: u32 = G_TILE * PPL * PV4;           // vec4s of q (and of acc) a lane holds
const_assert DPL % ELEMS == 0u;

// the slots' partial dots (when a slot spans subgroups), then the states' m and l, then their acc
const RED_N: u32 = max(max(WG * DPL, 2u * G_TILE * WG), WG * U * G_TILE);
var<workgroup> red: array<f32, RED_N>;

// where the block's q sits (Q_IN: registers, a copy in every lane; workgroup, once, read by every slot each step):
// Q_SHARED and the workgroup array qw (attention_fused_q.wgsl)
//!include attention_fused_q_{{Q_IN}}.wgsl
