// One lane's whole block of a format of an f16 d then QW quant words, 18 (Q4_0) or 34 (Q8_0) bytes
// (quant_lanes_q4_0_whole.wgsl, quant_lanes_q8_0_whole.wgsl: LPB 1). Block b spans words w = b * BLOCK_BYTES / 4
// .. w + QW: an even block starts on word w (d its lower half; quant word j the upper half of word w + j and the
// lower half of w + j + 1), an odd one mid-word (d the upper half of word w; quant word j is word w + 1 + j).
// Either way the lane loads the QW + 1 words w .. w + QW, and the parity it assembles them by is the block's.
// The reader's unit_values fills Values; unit_dot is theirs in common.
const QW: u32 = (BLOCK_BYTES - 2u) / 4u;  // quant words a block
const_assert LPB == 1u && QW * 4u + 2u == BLOCK_BYTES;

struct Unit {
  q: array<u32, QW>,
  d: f32,
}

fn load_unit(b: u32, t: u32) -> Unit {
  let w = b * BLOCK_BYTES / 4u;
  let odd = (b & 1u) != 0u;
  var a: array<u32, QW + 1u>;
  //!repeat J QW + 1
  a[$J] = word(w + ${J}u);
  //!end
  var u: Unit;
  //!repeat J QW
  u.q[$J] = quant_word(a[$J], a[${J}u + 1u], odd);
  //!end
  u.d = unpack2x16float(select(a[0], a[0] >> 16u, odd)).x;
  return u;
}

// What the reader makes of a unit: value vector i (the format's q, minus Q4_0's 8) multiplies x vector i, and
// the block's d their sum; the two partial sums halve the dependent chain.
struct Values {
  v: array<vec4<f32>, 8>,
  d: f32,
}

fn unit_dot(v: Values, xs: array<vec4<f32>, XV>, xp: XPart) -> f32 {
  let even = dot(v.v[0], xs[0]) + dot(v.v[2], xs[2]) + dot(v.v[4], xs[4]) + dot(v.v[6], xs[6]);
  let odd = dot(v.v[1], xs[1]) + dot(v.v[3], xs[3]) + dot(v.v[5], xs[5]) + dot(v.v[7], xs[7]);
  return v.d * (even + odd);
}
