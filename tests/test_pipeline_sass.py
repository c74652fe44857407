"""benchmarks/pipeline_sass.py: the machine code cut out of NVIDIA's pipeline-cache container, and nvdisasm's text
read into instructions and loops (the tool runs on the GPU machine; these check its parsing on made-up data)."""

import importlib.util
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("pipeline_sass", ROOT / "benchmarks" / "pipeline_sass.py")
ps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ps)


def _container(code: bytes, offset: int = 0x170) -> bytes:
    head = bytearray(b"NVDANVVMNVuc" + bytes(offset + 8 - 12))
    head[0x48:0x54] = struct.pack("<III", 1, len(code), offset)  # the section table's code entry
    return bytes(head) + code + b"\x00" * 64


def test_machine_code_is_the_sized_entry_8_bytes_past_its_offset():
    code = bytes(range(256)) * 2
    payload = _container(code)
    assert ps.machine_code(payload, len(code)) == code
    assert ps.machine_code(payload, len(code) + 16) is None      # no entry of that size
    assert ps.machine_code(b"ELF" + payload, len(code)) is None  # not NVIDIA's container
    assert ps.machine_code(payload[:0x180 + 100], len(code)) is None  # cut short


SASS = """
        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;   /* 0x00000a00ff017624 */
        /*0010*/                   LDG.E.CONSTANT R2, [R4.U32+UR4], !P0 ;     /* 0x0000000404027981 */
        /*0020*/                   LOP3.LUT R3, R2, 0xf00, R9, 0xea, !PT ;    /* 0x00000f0002037812 */
        /*0030*/                   FFMA.FTZ R5, R3, R6, R5 ;                  /* 0x0000000603057223 */
        /*0040*/               @P1 BRA 0x10 ;                                 /* 0x0000000000041947 */
        /*0050*/                   SHFL.BFLY PT, R7, R5, 0x1, 0x1f ;          /* 0x0c201f0005077f89 */
        /*0060*/              @!P2 BRA 0x50 ;                                 /* 0x0000000000002947 */
        /*0070*/                   BRA 0x90 ;                                 /* 0x0000000000047947 */
        /*0080*/                   EXIT ;                                     /* 0x000000000000794d */
"""


def test_instructions_and_loops_from_nvdisasm_text():
    insns = ps.instructions(SASS)
    assert [op for _, op, _ in insns] == ["IMAD.MOV.U32", "LDG.E.CONSTANT", "LOP3.LUT", "FFMA.FTZ", "BRA",
                                          "SHFL.BFLY", "BRA", "BRA", "EXIT"]
    assert [a for a, _, _ in insns] == list(range(0, 0x90, 0x10))
    # backward branches only (the forward BRA 0x90 is none), innermost (shortest) first
    assert ps.loops(insns) == [(0x50, 0x60), (0x10, 0x40)]
    body = [i for i in insns if 0x10 <= i[0] <= 0x40]
    assert ps.kinds(body) == "LDG 1, LOP3 1, FFMA 1, BRA 1"
