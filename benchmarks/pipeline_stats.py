"""What the GPU driver made of wgraph's kernels: registers, spills, shared memory, instruction counts, as the
driver reports them through VK_KHR_pipeline_executable_properties (run from the project root).

    gcc -shared -fPIC -O2 -I<vulkan headers> -o <dir>/libwgraph_pipeline_stats.so benchmarks/pipeline_stats/layer.c
    cp benchmarks/pipeline_stats/manifest.json <dir>/
    LAYER_DIR=<dir> python benchmarks/pipeline_stats.py [OP ...]

The layer (benchmarks/pipeline_stats/layer.c; the headers: Debian's libvulkan-dev) enables the extension on the
device wgpu creates and writes the statistics of every compute pipeline to a file; this script loads it (the
Vulkan loader's VK_LAYER_PATH / VK_INSTANCE_LAYERS, set before wgpu starts), compiles every registry kernel of the
ops named (default: every op in the registry) one at a time, and prints each kernel's statistics, writing them to
$OUT/pipeline_stats.json. A driver without the extension (lavapipe) says so and reports nothing. A measurement
tool: it changes no kernel. SHADERS=<dir>: a copy of wgraph/shaders/ with experimental registry entries (an A/B
script's, e.g. /tmp/attention_ab_shaders after benchmarks/attention_ab.py) compiled instead of the package's.

NVIDIA's driver (the H200's) names five statistics: Register Count (per thread; 255 is the most, and a warp's
registers bound how many warps an SM holds: 65536 per SM), Binary Size (bytes of machine code, 16 per
instruction), Stack Size, Shared Memory Size (bytes per workgroup) and Local Memory Size, whose low 32 bits are the
bytes of per-thread local memory (register spills and arrays the compiler could not keep in registers; the
value carries a flag at bit 36): printed as local_bytes. DUMP=<dir>: the layer also writes each pipeline's SPIR-V
and pipeline-cache data there (the machine code; benchmarks/pipeline_sass.py disassembles it); the JSON's
`pipeline` numbers the files. KERNELS=<regex>: only the kernels whose names it finds."""
import itertools
import json
import os
import re
import sys
import time
from pathlib import Path

LAYER_DIR = os.environ.get("LAYER_DIR")
if not LAYER_DIR or not (Path(LAYER_DIR) / "libwgraph_pipeline_stats.so").is_file():
    sys.exit("LAYER_DIR must name the folder holding libwgraph_pipeline_stats.so and manifest.json (see the docstring)")
OUT = Path(os.environ.get("OUT", "/tmp/pipeline_stats"))
OUT.mkdir(parents=True, exist_ok=True)
STATS = OUT / "pipeline_stats.txt"
STATS.unlink(missing_ok=True)
os.environ["VK_LAYER_PATH"] = LAYER_DIR
os.environ["VK_INSTANCE_LAYERS"] = "VK_LAYER_WGRAPH_pipeline_stats"
os.environ["WGRAPH_PIPELINE_STATS"] = str(STATS)
if os.environ.get("DUMP"):  # the layer writes each pipeline's SPIR-V and cache data there (pipeline_sass.py)
    Path(os.environ["DUMP"]).mkdir(parents=True, exist_ok=True)
    os.environ["WGRAPH_PIPELINE_DUMP"] = os.environ["DUMP"]

import wgraph.kernels.registry as R  # noqa: E402

if os.environ.get("SHADERS"):
    R.SHADER_DIR = Path(os.environ["SHADERS"])
import wgraph as wg  # noqa: E402
from wgraph.kernels.registry import kernels_for, registry  # noqa: E402

OPS = sys.argv[1:] or list(dict.fromkeys(k.op for k in registry().values()))
KERNELS = re.compile(os.environ.get("KERNELS", ""))  # only the kernels whose names this regex finds


def new_lines(seen: int) -> list[str]:
    lines = STATS.read_text().splitlines() if STATS.exists() else []
    return lines[seen:]


def parse(line: str) -> dict:
    """'pipeline 3 spirv_words=900 | NAME (subgroup 32): a=1; b=2; | ...' -> {executable: {stat: value}}"""
    parts = line.split(" | ")
    out = {"pipeline": int(parts[0].split()[1]), "spirv_words": int(parts[0].split("spirv_words=")[1])}
    for p in parts[1:]:
        if ":" not in p:
            out["note"] = p
            continue
        name, stats = p.split(":", 1)
        got = {k.strip(): v.strip() for k, v in (s.split("=", 1) for s in stats.split(";") if "=" in s)}
        if "Local Memory Size" in got:  # NVIDIA: the bytes in the low 32 bits, a flag above them
            got["local_bytes"] = str(int(got.pop("Local Memory Size")) & 0xFFFFFFFF)
        out[name.strip()] = got
    return out


dev = wg.default_device()
print(f"{dev.caps.adapter_name}", flush=True)
header = new_lines(0)
for line in header:
    print(line)
seen = len(header)
rows = []
for op in OPS:
    for kv in kernels_for(op):
        missing = sorted(set(kv.features) - dev.caps.features)
        if missing or not KERNELS.search(kv.name):
            continue
        # a kernel with overridable constants (all flags so far): one pipeline per combination of values
        for values in itertools.product((False, True), repeat=len(kv.overrides)):
            k = kv.specialized(dict(zip(sorted(kv.overrides), values)))
            name = kv.name + "".join(f"[{c}={int(v)}]" for c, v in k.constants.items())
            t0 = time.perf_counter()
            try:
                dev.pipelines.get(k)
            except Exception as e:  # noqa: BLE001 - one kernel the device refuses must not end the run
                print(f"{name}: {type(e).__name__}: {e}"[:200])
                continue
            lines = new_lines(seen)
            seen += len(lines)
            for line in lines:
                stats = parse(line)
                rows.append({"op": op, "kernel": name, "compile_s": time.perf_counter() - t0, **stats})
                shown = "; ".join(f"{e}: " + ", ".join(f"{k}={v}" for k, v in s.items())
                                  for e, s in stats.items() if isinstance(s, dict))
                print(f"{name:44} {shown or stats.get('note', '')}", flush=True)
(OUT / "pipeline_stats.json").write_text(json.dumps({"adapter": dev.caps.adapter_name, "rows": rows}, indent=1))
print(f"wrote {OUT / 'pipeline_stats.json'} ({len(rows)} pipelines)")
