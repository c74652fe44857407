// W's words made in registers from their index instead of loaded: the compute-only bound of the bench
// (benchmarks/quant_ab.py). The kernel keeps every other instruction (addresses, dequantizing, x loads, sums),
// so its time is what the GEMV costs without reading W; its outputs are meaningless and it is never planned.
// Bits 14 and 30 are cleared so a word read as two f16 scales holds finite ones (no NaN in the sums).
const FINITE_HALVES: u32 = 0xBFFFBFFFu;

fn word(i: u32) -> u32 {
  return (i * 0x9E3779B9u) & FINITE_HALVES;
}

fn word4(i: u32) -> vec4<u32> {
  let h = i * 0x9E3779B9u;
  return vec4<u32>(h, h ^ 0x85EBCA6Bu, h + 0xC2B2AE35u, h >> 3u) & vec4<u32>(FINITE_HALVES);
}
