"""The machine code NVIDIA's driver made of wgraph's kernels, disassembled: what each loop of a kernel costs in
instructions (run from the project root, after benchmarks/pipeline_stats.py with DUMP=<dir>).

    LAYER_DIR=<dir> DUMP=/tmp/dump OUT=/tmp/stats python benchmarks/pipeline_stats.py linear_q
    DUMP=/tmp/dump STATS=/tmp/stats/pipeline_stats.json OUT=/tmp/sass python benchmarks/pipeline_sass.py [REGEX ...]

The layer writes, per pipeline, the data of a pipeline cache that holds only it. NVIDIA's carries the compiled
kernel (zstd-compressed; machine_code says where); this script cuts the code out, disassembles it with
nvdisasm -b SM90 (the CUDA toolkit's, or the copy Triton ships beside torch) into $OUT/<kernel>.sass, then prints
for each kernel
named by a REGEX (default: all) its instruction count and each loop's (a backward branch's span): its
instructions by kind (FFMA, LOP3, LDG, ...), so a loop body's cost per weight can be read off. A measurement
tool: it changes no kernel. A driver whose cache data holds no code in this form (lavapipe) gets its blob's size
and first bytes printed instead."""
import collections
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path



def nvdisasm() -> str | None:
    found = shutil.which("nvdisasm")
    if found:
        return found
    for pattern in ("/usr/local/cuda*/bin/nvdisasm", "/usr/local/lib/python3*/*-packages/triton/backends/nvidia/bin/nvdisasm",
                    "/usr/lib/python3*/*-packages/triton/backends/nvidia/bin/nvdisasm", "/opt/*/lib/python3*/site-packages/triton/backends/nvidia/bin/nvdisasm"):
        hits = glob.glob(pattern)
        if hits:
            return hits[0]
    try:
        import triton  # noqa: F401 - only for its folder
        path = Path(triton.__file__).parent / "backends/nvidia/bin/nvdisasm"
        return str(path) if path.exists() else None
    except ImportError:
        return None


ZSTD_FRAME = b"\x28\xb5\x2f\xfd"
NVIDIA_CODE = b"NVDANVVMNVuc"


def cache_payload(blob: bytes) -> bytes | None:
    """The zstd frame of NVIDIA's pipeline-cache data, decompressed (driver 580 on the H200: Vulkan's 32-byte cache
    header, a "CPKV" entry header, then one frame); None where the data holds no frame (lavapipe)."""
    at = blob.find(ZSTD_FRAME)
    if at < 0:
        return None
    try:
        import zstandard
    except ImportError:
        sys.exit("pipeline_sass.py needs the zstandard package (pip install zstandard) to read NVIDIA's cache data")
    return zstandard.ZstdDecompressor().decompressobj().decompress(blob[at:])


def machine_code(payload: bytes, size: int) -> bytes | None:
    """The `size` bytes of machine code in a decompressed cache payload, or None where it is not found.

    The payload is an "NVDANVVMNVuc" container whose section table holds (kind 1, size, offset) for the code,
    which starts 8 bytes after that offset (its first instruction is the usual `IMAD.MOV.U32 R1, RZ, RZ,
    c[0x0][0x28]`). `size` is the driver's Binary Size statistic, which names the entry."""
    if not payload.startswith(NVIDIA_CODE):
        return None
    entry = payload.find(struct.pack("<II", 1, size))
    if entry < 0:
        return None
    offset, = struct.unpack_from("<I", payload, entry + 8)
    code = payload[offset + 8:offset + 8 + size]
    return code if len(code) == size else None


INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


def instructions(sass: str) -> list[tuple[int, str, str]]:
    """(address, opcode, operands) of each instruction in nvdisasm's text."""
    return [(int(m.group(1), 16), m.group(3), m.group(4)) for m in INSN.finditer(sass)]


def loops(insns: list[tuple[int, str, str]]) -> list[tuple[int, int]]:
    """(start, end) address spans of backward branches (the loops), innermost first."""
    spans = []
    for addr, op, args in insns:
        if op.startswith("BRA"):
            m = re.search(r"0x([0-9a-f]+)", args)
            if m and int(m.group(1), 16) <= addr:
                spans.append((int(m.group(1), 16), addr))
    return sorted(spans, key=lambda s: s[1] - s[0])


def kinds(insns) -> str:
    count = collections.Counter(op.split(".")[0] for _, op, _ in insns)
    return ", ".join(f"{k} {v}" for k, v in count.most_common())


def main() -> None:
    dump = Path(os.environ.get("DUMP", "/tmp/dump"))
    stats = Path(os.environ.get("STATS", "/tmp/pipeline_stats/pipeline_stats.json"))
    out = Path(os.environ.get("OUT", "/tmp/pipeline_sass"))
    out.mkdir(parents=True, exist_ok=True)
    arch = os.environ.get("ARCH", "SM90")  # the H200's
    tool = nvdisasm()
    rows = json.loads(stats.read_text())["rows"]
    patterns = [re.compile(p) for p in sys.argv[1:]]
    print(f"nvdisasm: {tool or 'not found'}")
    summary = {}
    for row in rows:
        name = row["kernel"]
        if patterns and not any(p.search(name) for p in patterns):
            continue
        cache = dump / f"pipeline_{row['pipeline']}.cache"
        if not cache.exists():
            print(f"{name}: no cache data ({cache})")
            continue
        blob = cache.read_bytes()
        executable = next(v for v in row.values() if isinstance(v, dict) and "Binary Size" in v)
        payload = cache_payload(blob)
        code = machine_code(payload, int(executable["Binary Size"])) if payload else None
        if code is None or not tool:
            print(f"{name}: {len(blob)} bytes of cache data, no machine code found: {blob[:64].hex()}")
            continue
        path = out / f"{name}.bin"
        path.write_bytes(code)
        got = subprocess.run([tool, "-b", arch, str(path)], capture_output=True, text=True)
        sass = got.stdout or got.stderr
        (out / f"{name}.sass").write_text(sass)
        insns = instructions(sass)
        print(f"{name}: {len(insns)} instructions: {kinds(insns)}")
        summary[name] = {"instructions": len(insns), "loops": []}
        for start, end in loops(insns):
            body = [i for i in insns if start <= i[0] <= end]
            print(f"  loop {start:#x}-{end:#x}: {len(body)} instructions: {kinds(body)}")
            summary[name]["loops"].append({"start": start, "end": end, "instructions": len(body),
                                           "kinds": dict(collections.Counter(op.split('.')[0] for _, op, _ in body))})
    (out / "pipeline_sass.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
