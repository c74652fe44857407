// Attention with torch's attn_mask (wg.ops.sdpa): one workgroup per (query i, folded head hh = batch * heads +
// head). Keys go in tiles of WG: thread t scores key j0 + t, a workgroup reduction gives the tile's max and sum,
// and thread t accumulates output dims t, t + WG, ... (online softmax across tiles, all in f32).
// The mask is read through strides (0 on a broadcast axis): u32 booleans (nonzero: the key takes part) or f32
// bits added to the score; an f32 -inf masks the key exactly (no inf arithmetic). A row with no key left is 0.
// NaN as torch and the float64 reference: a key that takes part with a NaN or +inf score (NaN or +inf in the
// mask, NaN in q or in its k row, an overflow) makes the whole row NaN (softmax's exp(inf - inf)); the tests are
// on the bits, since WGSL lets a compiler assume floats are never NaN or inf. A taking-part score of -inf
// weighs 0, as exp(-inf) does. P.V skips every key a row does not see (rather than multiplying its v row by a
// weight of 0): a NaN or inf in a masked key's v reaches no row (docs/errors.md's nan-propagates rule).
{{ENABLE}}
struct SdpaMaskedParams {
  seq_q: u32,
  seq_k: u32,
  heads: u32,          // q heads per batch entry
  folded_heads: u32,   // batch * heads: the middle axis of q and out
  kv_group: u32,       // q heads per kv head
  head_dim: u32,
  scale: f32,
  mask_bool: u32,      // 1: u32 booleans, 0: f32 additive
  mask_stride_b: u32,
  mask_stride_h: u32,
  mask_stride_q: u32,
  mask_stride_k: u32,
}

@group(0) @binding(0) var<uniform> params: SdpaMaskedParams;
@group(0) @binding(1) var<storage, read> q: array<{{T}}>;      // [seq_q, folded_heads, head_dim]
@group(0) @binding(2) var<storage, read> k: array<{{T}}>;      // [seq_k, folded_heads / kv_group, head_dim]
@group(0) @binding(3) var<storage, read> v: array<{{T}}>;
@group(0) @binding(4) var<storage, read> mask: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<{{T}}>;  // [seq_q, folded_heads, head_dim]

const WG: u32 = {{WORKGROUP_SIZE_X}}u;
const MAX_D: u32 = {{MAX_HEAD_DIM}}u;
const ACC: u32 = MAX_D / WG;
const LOWEST: f32 = -3.40282347e38;   // f32's lowest finite value: no taking-part finite score is below it
const NEG_INF_BITS: u32 = 0xff800000u;
const POS_INF_BITS: u32 = 0x7f800000u;
const NAN_BITS: u32 = 0x7fc00000u;

fn is_nan_or_pos_inf(x: f32) -> bool {
  let b = bitcast<u32>(x);
  return (b & 0x7fffffffu) > POS_INF_BITS || b == POS_INF_BITS;
}

var<workgroup> q_row: array<f32, MAX_D>;
var<workgroup> probs: array<f32, WG>;
var<workgroup> part: array<u32, WG>;   // 1: the tile's key j0 + t takes part (the mask keeps it)
var<workgroup> red: array<f32, WG>;

fn reduce_max(t: u32, x: f32) -> f32 {
  red[t] = x;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w = w / 2u) {
    if (t < w) {
      red[t] = max(red[t], red[t + w]);
    }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

fn reduce_sum(t: u32, x: f32) -> f32 {
  red[t] = x;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w = w / 2u) {
    if (t < w) {
      red[t] = red[t] + red[t + w];
    }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let hh = wid.x;
  let i = wid.y;
  let D = params.head_dim;
  let kv_heads = params.folded_heads / params.kv_group;
  let kvh = hh / params.kv_group;
  let mask_row = (hh / params.heads) * params.mask_stride_b + (hh % params.heads) * params.mask_stride_h
                 + i * params.mask_stride_q;
  let q_base = (i * params.folded_heads + hh) * D;
  for (var d = t; d < D; d = d + WG) {
    q_row[d] = f32(q[q_base + d]);
  }
  workgroupBarrier();
  var m = LOWEST;       // the running max of the finite scores that took part (once l > 0)
  var l = 0.0;          // NaN once a score that took part was NaN or +inf: the row is NaN
  var acc: array<f32, ACC>;
  for (var a = 0u; a < ACC; a = a + 1u) {
    acc[a] = 0.0;
  }
  for (var j0 = 0u; j0 < params.seq_k; j0 = j0 + WG) {
    let j = j0 + t;
    var s = LOWEST;
    var p = 0.0;
    var weighs = false;   // takes part with a finite score
    var bad = false;      // takes part with a NaN or +inf score
    var takes_part = false;
    if (j < params.seq_k) {
      let w = mask[mask_row + j * params.mask_stride_k];
      var bias = 0.0;
      if (params.mask_bool == 1u) {
        takes_part = w != 0u;
      } else {
        takes_part = w != NEG_INF_BITS;
        bias = bitcast<f32>(w);
      }
      if (takes_part) {
        let kb = (j * kv_heads + kvh) * D;
        var dot = 0.0;
        for (var d = 0u; d < D; d = d + 1u) {
          dot = dot + q_row[d] * f32(k[kb + d]);
        }
        let score = dot * params.scale + bias;
        bad = is_nan_or_pos_inf(score);
        weighs = !bad && bitcast<u32>(score) != NEG_INF_BITS;
        s = select(LOWEST, score, weighs);
      }
    }
    let seen = l > 0.0;   // some finite score took part in an earlier tile (false once l is NaN: it stays NaN)
    let m_new = max(m, reduce_max(t, s));
    if (weighs) {
      p = exp(s - m_new);
    }
    p = select(p, bitcast<f32>(NAN_BITS), bad);   // the NaN reaches l and every output dim through the sums
    probs[t] = p;
    part[t] = u32(takes_part);
    let corr = select(0.0, exp(m - m_new), seen);   // 1 when the max did not move
    l = l * corr + reduce_sum(t, p);   // reduce_sum's barriers also publish probs and part
    let n = min(WG, params.seq_k - j0);
    for (var a = 0u; a < ACC; a = a + 1u) {
      let d = t + a * WG;
      if (d < D) {
        var sum = acc[a] * corr;
        for (var jj = 0u; jj < n; jj = jj + 1u) {
          if (part[jj] != 0u) {   // a masked key's v is never read: 0 * NaN would be NaN
            sum = sum + probs[jj] * f32(v[((j0 + jj) * kv_heads + kvh) * D + d]);
          }
        }
        acc[a] = sum;
      }
    }
    m = m_new;
    workgroupBarrier();   // every thread has read probs before the next tile writes it
  }
  let poisoned = is_nan_or_pos_inf(l);
  for (var a = 0u; a < ACC; a = a + 1u) {
    let d = t + a * WG;
    if (d < D) {
      var o = 0.0;
      if (l > 0.0) {
        o = acc[a] / l;
      }
      out[q_base + d] = {{T}}(select(o, bitcast<f32>(NAN_BITS), poisoned));
    }
  }
}
