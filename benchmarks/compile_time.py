"""Pipeline compilation of the package's registry (run from the project root): every kernel the device can run,
its overridable flags all off and all on, compiled on a fresh device one after another, then on another fresh
device side by side (PipelineCache.warm, THREADS workers; default: warm's own choice). Prints both times. What the
first use of a model pays on a driver whose compiler is slow (lavapipe: LLVM)."""
import os
import time

import wgraph as wg
from wgraph.kernels.registry import registry


def kernels(dev) -> list:
    out = []
    for k in registry().values():
        if set(k.features) <= dev.caps.features and k.workgroup_memory <= dev.caps.max_workgroup_storage:
            out += [k.specialized({n: v for n in k.overrides}) for v in ((False, True) if k.overrides else (None,))]
    return out


threads = int(os.environ["THREADS"]) if os.environ.get("THREADS") else None
one = wg.Device()
ks = kernels(one)
t0 = time.perf_counter()
for k in ks:
    one.pipelines.get(k)
serial = time.perf_counter() - t0
side = wg.Device()
t0 = time.perf_counter()
side.pipelines.warm(kernels(side), threads=threads)
parallel = time.perf_counter() - t0
print(f"{one.caps.adapter_name}, {os.cpu_count()} CPUs: {len(ks)} pipelines in {serial:.1f} s one after another, "
      f"{parallel:.1f} s side by side (PipelineCache.warm, threads={threads or 'default'})")
