"""Prefill on a CPU adapter (lavapipe), run from the project root: 37 rows (ROWS=n: n) through one 576 -> 3072
`linear` (f32 and f16 weights), and a prefill of as many tokens through the bench's seeded model of SmolLM2-135M's
shape (hidden 576, intermediate 1536, 30 layers, 9/3 heads x 64, vocab 49152). Prints the median wall time of each
and the process CPU time (lavapipe's worker threads included: what the work costs, whatever else loads the machine);
`JSON=path` also writes them. Before/after the register-tiled GEMM and the CPU GEMV's row passes: docs/benchmarks.md."""
import json
import os
import statistics
import time

import numpy as np

import wgraph as wg
from wgraph.bench.model import SMOLLM2_135M, SeededLlama
from wgraph.models.config import LlamaConfig

ROWS = int(os.environ.get("ROWS", "37"))  # from 9 rows a CPU adapter plans its GEMV in passes of 32 rows


def timed(call, runs: int) -> tuple[float, float]:
    """Median wall seconds and median process CPU seconds of `runs` calls."""
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        call()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def main():
    dev = wg.default_device()
    rng = np.random.default_rng(0)
    result = {"adapter": dev.caps.adapter_name, "rows": ROWS}
    x = dev.tensor(rng.standard_normal((ROWS, 576), np.float32))
    for dt in ("f32", "f16"):
        w = dev.tensor((rng.standard_normal((3072, 576), np.float32) * 0.05).astype(dt.replace("f", "float")))
        y = wg.ops.linear(x, w)
        y.numpy()  # warm: pipeline

        def call():
            wg.ops.linear(x, w, out=y)
            y.numpy()

        wall, cpu = timed(call, 5)
        result[f"linear_{ROWS}x576x3072_{dt}"] = {"wall_s": wall, "cpu_s": cpu}
        print(f"linear {ROWS} rows 576 -> 3072 {dt} weights: {wall * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU",
              flush=True)
    cfg = LlamaConfig.from_dict(SMOLLM2_135M)
    dtype = "f16" if dev.caps.has_f16 else "f32"
    model = SeededLlama(cfg, dev, dtype=dtype, max_seq=64)  # the bench's seeded weights, filled on the GPU
    ids = rng.integers(0, cfg.vocab_size, ROWS)
    model.prefill(ids).numpy()  # warm: pipelines
    wall, cpu = timed(lambda: model.prefill(ids).numpy(), int(os.environ.get("RUNS", "3")))
    result[f"prefill_135m_{dtype}"] = {"wall_s": wall, "cpu_s": cpu}
    print(f"prefill {ROWS} tokens, SmolLM2-135M shape, {dtype}: {wall:.2f} s wall, {cpu:.2f} s CPU", flush=True)
    if os.environ.get("JSON"):
        with open(os.environ["JSON"], "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
