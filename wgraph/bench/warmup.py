"""Bringing the GPU to the state every timed shape sees: the clocks raised by steady work, torch's CUDA context
made (when torch is in the run), and the GPU's clocks read where `nvidia-smi` exists, so a slow first shape is
explained, not guessed at (docs/measurements.md, "The first shape")."""

from __future__ import annotations

import shutil
import subprocess
import time
import weakref

import numpy as np


def gpu_clocks() -> dict | None:
    """The GPU's SM and memory clocks (MHz) and performance state now, from nvidia-smi; None without it."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=clocks.sm,clocks.mem,pstate,utilization.gpu",
                              "--format=csv,noheader,nounits", "-i", "0"], capture_output=True, text=True,
                             timeout=5).stdout.strip()
        sm, mem, pstate, util = (x.strip() for x in out.split(","))
        return {"sm_mhz": int(sm), "mem_mhz": int(mem), "pstate": pstate, "util_pct": int(util)}
    except Exception:  # noqa: BLE001 - no reading is an answer too
        return None


def init_torch_cuda() -> bool:
    """Make torch's CUDA context now (an allocation and a kernel), so that it exists before the first timed shape
    and not only after it; False without torch or CUDA."""
    try:
        import torch

        if not torch.cuda.is_available():
            return False
        x = torch.ones(1 << 20, device="cuda")
        (x * 2).sum().item()
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001
        return False


# The copies' buffers, made once a device: the timers warm up before every shape and variant (timing.warm)
_COPY_BUFFERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _copy_buffers(dev, nbytes: int) -> tuple:
    nbytes = min(nbytes, dev.caps.max_storage_binding_size) // 16 * 16
    held = _COPY_BUFFERS.get(dev)
    if held is None or held[0].nbytes != nbytes:
        x = dev.tensor(np.zeros(nbytes // 4, np.uint32))
        held = _COPY_BUFFERS[dev] = (x, dev.empty(x.shape, "u32"))
    return held


COPIES_A_RECORDING = 8
STAMP_EVERY = 8  # recordings: a stamped one is read back (a wait), so the GPU idles once in STAMP_EVERY


def steady_work(dev, seconds: float, nbytes: int = 256 << 20) -> list[float]:
    """Keep the GPU busy for `seconds` with back-to-back copies: recordings of COPIES_A_RECORDING copies submitted
    without waiting for each other (the device's in-flight window bounds them), so the GPU runs one while the host
    records the next; every STAMP_EVERY-th recording is stamped and read back. Returns the GPU µs of a copy in each
    stamped recording, so a caller sees the clocks come up. Stamping and reading back every recording of 4 copies
    (until 2026-12-07) left the GPU idle much of the time: from idle, an H100's SM clock rose only to 495-585 MHz
    in 0.3 s of it (benchmarks/results/h100-cold-probe-1207.log)."""
    from wgraph.bench.memory_kernels import BENCH_COPY, CopyParams
    from wgraph.ops.core import apply

    x, y = _copy_buffers(dev, nbytes)
    trace = []
    end = time.perf_counter() + seconds
    made = 0
    while time.perf_counter() < end:
        stamped = dev.caps.has_timestamps and made % STAMP_EVERY == 0
        with dev.record(profile=stamped) as rec:
            for _ in range(COPIES_A_RECORDING):
                apply(BENCH_COPY, CopyParams(), (x,), out=y)
        if stamped:
            trace.append(rec.profile().span_us / COPIES_A_RECORDING)
        made += 1
    dev.sync()
    return trace


def prepare(dev, use_torch: bool, seconds: float = 1.0) -> dict:
    """What every timed section does first: torch's CUDA context, then `seconds` of steady GPU work. Returns the
    facts (clocks before and after, the copy times as the clocks came up) for the result's JSON."""
    before = gpu_clocks()
    torch_ready = init_torch_cuda() if use_torch else False
    trace = [] if dev.caps.is_cpu else steady_work(dev, seconds)   # lavapipe's "GPU" is the host's cores
    return {"clocks_before": before, "clocks_after": gpu_clocks(), "torch_context": torch_ready,
            "steady_work_s": seconds, "copy_us_first_last": [trace[0], trace[-1]] if trace else None}
