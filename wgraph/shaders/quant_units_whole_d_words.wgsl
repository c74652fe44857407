// One lane's whole block of a format of an f16 d then QW quant words, 18 (Q4_0) or 34 (Q8_0) bytes
// (quant_lanes_q4_0_whole.wgsl, quant_lanes_q8_0_whole.wgsl: LPB 1). Block b spans words w = b * BLOCK_BYTES / 4
// .. w + QW: an even block starts on word w (d its lower half; quant word j the upper half of word w + j and the
// lower half of w + j + 1), an odd one mid-word (d the upper half of word w; quant word j is word w + 1 + j).
// Either way the lane loads the QW + 1 words w .. w + QW, and the parity it assembles them by is the block's.
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
