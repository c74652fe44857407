"""A/B of the touch candidates on one GPU in one run (run from the project root): each lane also reads one word
of the weight's (GEMV) or the K/V cache's (split-K decode) 128-byte line TOUCH steps ahead of its loads, so DRAM
has those lines in flight while the registers hold one step (gemv_core_touch.wgsl, attention_fused_steps_touch.wgsl;
docs/benchmarks.md says why). Prints, per shape, GPU µs per call of the planned kernel and of each candidate,
median of ROUNDS rounds taken in turns (order reversed every other round); decode beside torch SDPA (GQA) where
torch has CUDA. The GEMV calls and the decode calls are chains (each call writes what the next waits on).
Knobs: SMALL=1 (lavapipe-sized shapes: a smoke run), ROUNDS (default 3), SECTIONS ("gemv,decode")."""
import os
import statistics

import numpy as np

try:  # before wgraph's first device (two LLVMs in one process on lavapipe)
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

import wgraph as wg
from wgraph.bench import timing
from wgraph.bench.warmup import steady_work
from wgraph.ops.dense import plan_linear

SMALL = os.environ.get("SMALL") == "1"
ROUNDS = int(os.environ.get("ROUNDS", "1" if SMALL else "3"))
SECTIONS = os.environ.get("SECTIONS", "gemv,decode").split(",")
R8 = ["gemv_r8_wide_t4_f16", "gemv_r8_wide_t8_f16", "gemv_r8_long_t4_f16", "gemv_r8_long_t8_f16"]
R1 = ["gemv_r1_wide_t4_f16", "gemv_r1_long_t4_f16", "gemv_r1_t4_f16", "gemv_r1_t8_f16"]
# (rows, out, in): the 1B and 8B matrices issue 22's 8-row and 1-row GEMV targets miss
GEMV_SHAPES = [(8, 128256, 2048), (8, 8192, 2048), (8, 2048, 8192), (8, 2048, 2048), (8, 14336, 4096),
               (8, 4096, 14336), (8, 4096, 4096), (8, 128256, 4096), (1, 8192, 2048), (1, 2048, 8192), (1, 4096, 4096),
               (1, 14336, 4096), (1, 4096, 14336), (1, 128256, 2048), (1, 2048, 2048)]
DECODE_SHAPES = [(32, 8, 128), (32, 8, 64)]
DECODE_LENGTHS = (4096, 16384, 32768)
if SMALL:
    GEMV_SHAPES = [(8, 64, 256), (1, 64, 256)]
    DECODE_SHAPES, DECODE_LENGTHS = [(8, 2, 64)], (700,)


def in_turns(configs, time_one) -> dict:
    """{config: [µs per round]}, the configurations in turns, the order reversed every other round."""
    times = {c: [] for c in configs}
    for r in range(ROUNDS):
        for c in (configs if r % 2 == 0 else configs[::-1]):
            times[c].append(time_one(c))
    return times


def report(title: str, times: dict, extra=lambda med: "") -> None:
    lines = [title]
    for c, ts in times.items():
        med = statistics.median(ts)
        lines.append(f"   {(c or 'planned'):26s} {med:9.2f} us{extra(med)}  rounds " + " ".join(f"{t:.2f}" for t in ts))
    print("\n".join(lines), flush=True)


def gemv_section(dev, rng) -> None:
    for m, n, k in GEMV_SHAPES:
        w = dev.tensor((rng.standard_normal((n, k), dtype=np.float32) * k ** -0.5).astype(np.float16))
        x = dev.tensor(rng.standard_normal((m, k)).astype(np.float32))
        y = dev.empty((m, n), "f32")
        planned = plan_linear(m, n, k, "f16", dev.caps).variant
        configs = [None] + (R8 if m > 1 else R1)
        ref = wg.ops.linear(x, w).numpy()
        for c in configs[1:]:
            err = float(np.abs(wg.ops.linear(x, w, variant=c).numpy() - ref).max() / np.abs(ref).max())
            if err > 1e-5:
                print(f"MISMATCH {c} [{n}, {k}] m={m}: {err:.2e}", flush=True)
        est = statistics.median(timing.calls_us(dev, lambda: wg.ops.linear(x, w, out=y), 4, 1) or [1.0])
        reps = int(max(4, min(200, 20000 / max(est, 1e-3))))

        def one(c):
            return statistics.median(timing.calls_us(dev, lambda: wg.ops.linear(x, w, variant=c, out=y), reps, 3))
        report(f"gemv m={m} [{n}, {k}] f16 (planned {planned})", in_turns(configs, one),
               lambda med: f" {n * k * 2 / med / 1e3:7.1f} GB/s")


def torch_decode_us(hq, hkv, d, keys) -> float:
    if torch is None or not torch.cuda.is_available():
        return float("nan")
    q = torch.randn(1, hq, 1, d, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(1, hkv, keys, d, device="cuda", dtype=torch.float16) for _ in range(2))
    for _ in range(20):
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(5):
        start.record()
        for _ in range(100):
            F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) * 1000 / 100)
    return statistics.median(out)


def decode_section(dev, rng) -> None:
    import sys
    sys.path.insert(0, "benchmarks")
    from decode_short import decode_inputs, ping_pong

    for hq, hkv, d in DECODE_SHAPES:
        for keys in DECODE_LENGTHS:
            kc, vc, qa, qb = decode_inputs(dev, rng, hq, hkv, d, keys)
            klen = dev.tensor(np.array([keys], np.uint32))
            ref = wg.ops.attention(qa, kc, vc, causal=True, kv_len=klen).numpy()
            planned = wg.ops.attention_plan(qa, kc, vc, causal=True, kv_len=klen).variant
            suffix = planned.rsplit("_", 1)[1]
            configs = [None] + [f"decode_fused_g4_{t}_{suffix}" for t in ("t4", "t8")]
            for c in configs[1:]:
                got = wg.ops.attention(qa, kc, vc, causal=True, kv_len=klen, variant=c).numpy()
                err = float(np.abs(got - ref).max())
                if err > 2e-3:
                    print(f"MISMATCH {c} {hq}/{hkv} D{d} {keys} keys: {err:.2e}", flush=True)

            def one(c):
                call = ping_pong(qa, qb, lambda s, o: wg.ops.attention(s, kc, vc, causal=True, kv_len=klen, out=o,
                                                                       variant=c))
                timing.warm(dev, call, 0.2)
                return statistics.median(timing.calls_us(dev, call, 60, batches=3))
            t = torch_decode_us(hq, hkv, d, keys)
            report(f"decode {hq}/{hkv} D{d} {keys} keys f16 caches (planned {planned}); torch SDPA {t:.2f} us",
                   in_turns(configs, one), lambda med: f"  torch / this {t / med:.3f}")


def main() -> None:
    dev = wg.default_device()
    print(dev.caps.adapter_name, flush=True)
    steady_work(dev, 0.2 if SMALL else 1.5)
    rng = np.random.default_rng(0)
    if "gemv" in SECTIONS:
        gemv_section(dev, rng)
    if "decode" in SECTIONS:
        decode_section(dev, rng)


if __name__ == "__main__":
    main()
