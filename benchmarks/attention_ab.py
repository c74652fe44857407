"""A/B of attention kernels on one GPU in one command (run from the project root; about 6 minutes on the H200):

  warm     the first shape a process runs, timed over and over before torch exists, after torch's CUDA context is
           made, and after a second of steady GPU work, with the GPU's clocks (nvidia-smi) read beside it
  decode   f16 decode, the decode grid's 16 shapes: the planned kernel, split-K, and configurations of the fused
           split-K kernel (experimental registry entries in a copy of wgraph/shaders/, never planned) beside
           torch SDPA
  batched  attention_kvcache decode at B = 1, 8, 32, 64 (the planned kernel, and the single-sequence kernel on
           the same shape beside B = 1); varlen prefill beside the single-sequence flash kernel on the same rows
  prefill  f32 prefill 16/16 D=128 at S 2048 and 4096: the planned kernel and flash configurations

Every GPU time is taken two ways: `span` = one recording of back-to-back calls timed from the first dispatch's
start to the last one's end (timestamps around every dispatch, which also give the per-kernel split), and
`replay` = a compiled Program of 20 calls replayed back to back and timed by the wall clock (no timestamps;
GPU-bound, as torch's CUDA-event loop is). `python benchmarks/attention_ab.py decode batched` runs some sections;
`benchmarks/attention_apply.py $OUT/attention_ab.json` writes the winners into the registry. Writes
$OUT/attention_ab.json as it goes. SMALL=1: a smoke run on lavapipe (tiny shapes). HEADS="64/8,..." (decode and
batched heads; default 32/8 and 16/16 for decode, 32/8 batched), LENGTHS="4096,..." (decode kv lengths) and
DIMS="128" narrow the decode and batched sections to other shapes (GQA groups of 8: HEADS=64/8); VARLEN=0 leaves
the varlen prefill out of the batched section; KV (4096) the batched section's cache length (<= 512: the
one-pass kernel's configurations SINGLE too), BATCHES="1,8,32,64" its batch sizes. FUSED=1 adds the fused kernel's
configurations (FUSED below, measured in h200-attention-ab*.log)."""
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import ab_registry
import ab_timing

SMALL = os.environ.get("SMALL") == "1"
OUT = Path(os.environ.get("OUT", "/tmp/attention_ab"))
OUT.mkdir(parents=True, exist_ok=True)
SECTIONS = [a for a in sys.argv[1:]] or ["warm", "decode", "batched", "prefill"]


_env_list = ab_registry.env_list
HEADS = _env_list("HEADS", lambda v: tuple(int(x) for x in v.split("/")))
LENGTHS = _env_list("LENGTHS", int)
DIMS = _env_list("DIMS", int)
VARLEN_ROWS = os.environ.get("VARLEN", "1") != "0"
FUSED_CONFIGS = os.environ.get("FUSED") == "1"
BATCHES = _env_list("BATCHES", int) or (1, 8, 32, 64)
EXP = Path("/tmp/attention_ab_shaders")
FLAT = ab_registry.copy_shaders(EXP)  # every kernel's entry, expanded


def exp_entry(src: str, name: str, config: dict) -> str:
    """Kernel `src`'s expanded registry entry renamed, with `config` applied (WG: workgroup size; DIMS_PER_LANE:
    the limit and the head-dim multiple; anything else a define), tier 'exp' so the planner never takes it."""
    e = {**FLAT[src], "tier": "exp", "defines": dict(FLAT[src].get("defines", {})),
         "limits": dict(FLAT[src]["limits"])}
    for key, value in config.items():
        if key == "WG":
            e["workgroup_size"] = [value, 1, 1]
        elif key == "DIMS_PER_LANE":
            e["limits"]["dims_per_lane"] = e["head_dim_multiple"] = value
        else:
            e["defines"][key] = str(value)
    return ab_registry.toml_entry(name, e)


# Fused decode configurations per G_TILE (the registry's own is measured as the planned kernel). Each changes
# what the profile says bounds the kernel: bytes of loads in flight per SM, which the registers bound.
# Q_IN=workgroup reads q from workgroup memory instead of a copy in every lane's registers (G_TILE x
# DIMS_PER_LANE floats a lane freed), alone or spent on more keys a step (KEYS_PER_THREAD). Earlier rounds'
# configurations (more workgroups: SPLIT_TARGET; DIMS_PER_LANE 8; KEYS_PER_THREAD 4 with q in registers) are in
# git and in h200-attention-ab*.log: none beat the registry's by more than 6%. batched_fused_g4's f16 rows took
# qs_u4 after h100-attention-qs-ab.log (so its configurations here equal its planned kernel).
FUSED = {g: {"qs": dict(Q_IN="workgroup"), "qs_u4": dict(Q_IN="workgroup", KEYS_PER_THREAD=4)} for g in (1, 4, 8)}
# f32 prefill flash configurations at D=128 (the registry's: BLOCK_M 64, 2 threads a query, 8-key tiles)
PREFILL = {"bm128_t2_n8": dict(BLOCK_M=128, WG=256, TILE_N=8), "bm64_t2_n4": dict(TILE_N=4),
           "bm32_t4_n8": dict(BLOCK_M=32, THREADS_PER_QUERY=4, TILE_N=8)}
# batched flash at D=128 for the ragged varlen rows (short sequences: smaller query blocks)
VARLEN = {"bm32": dict(BLOCK_M=32, WG=64)}
# The batched one-pass decode (tier single: short caches, the batched model's) configured from batched_single_f16:
# several q heads of a kv head a workgroup (B x Hkv x Hq / Hkv / G_TILE workgroups, each key row read once for G_TILE
# heads, against B x Hq at G_TILE 1: 1024 at B = 32 of 32 q heads) and fewer threads (a workgroup's slots merge
# through workgroup memory at the end: fewer slots, less merging). The first set (h100-attention-single-g-1206.log:
# G_TILE 2 / 4 at 256 threads, no faster; 4 at 128, 2.2x at B = 32) made batched_single_g4; this one
# (h100-attention-single-g2-1206.log, -kv256-, -kv512-) batched_single_g4_wg64.
SINGLE = {"g1_wg128": dict(WG=128), "g1_wg64": dict(WG=64), "g2_wg128": dict(G_TILE=2, WG=128),
          "g4_wg128": dict(G_TILE=4, WG=128), "g4_wg64": dict(G_TILE=4, WG=64),
          "g4_wg128_k4": dict(G_TILE=4, WG=128, KEYS_PER_THREAD=4),
          "g4_wg128_qs": dict(G_TILE=4, WG=128, Q_IN="workgroup")}

extra = []
for g, confs in FUSED.items():
    for tag, conf in confs.items():
        extra.append(exp_entry(f"decode_fused_g{g}_f16", f"x_fused_g{g}_f16_{tag}", conf))
        extra.append(exp_entry(f"batched_fused_g{g}_f16", f"x_bfused_g{g}_f16_{tag}", conf))
for tag, conf in PREFILL.items():
    extra.append(exp_entry("prefill_flash_d128_f32", f"x_flash_d128_f32_{tag}", conf))
for tag, conf in VARLEN.items():
    extra.append(exp_entry("batched_flash_d128_f16", f"x_bflash_d128_f16_{tag}", conf))
for tag, conf in SINGLE.items():
    extra.append(exp_entry("batched_single_f16", f"x_bsingle_f16_{tag}", conf))
(EXP / "registry" / "zz_experiments.toml").write_text("\n\n".join(extra) + "\n")

import wgraph.kernels.registry as R  # noqa: E402

R.SHADER_DIR = EXP
import wgraph as wg  # noqa: E402
from wgraph.bench import timing, torch_ref, warmup  # noqa: E402

from wgraph.bench.grids import Shape, bytes_moved, flops  # noqa: E402

dev = wg.default_device()
print(dev.caps, flush=True)
TORCH = torch_ref.probe()["available"]
RES = {"caps": str(dev.caps), "sections": SECTIONS,
       "configs": {"fused": {str(g): c for g, c in FUSED.items()}, "prefill": PREFILL, "varlen": VARLEN,
                   "single": SINGLE}}
N_CALLS = 5 if SMALL else 20


def save():
    (OUT / "attention_ab.json").write_text(json.dumps(RES, indent=1, default=str))


def span_us(call, n: int, warm_s: float = 0.2):
    """ab_timing.span_us on this script's device."""
    return ab_timing.span_us(dev, call, n, warm_s)


def replay_us(build, n: int = N_CALLS, min_s: float = 0.15):
    """(µs per call, GPU-bound) of `n` calls made by `build` replayed on this script's device (the bench's timer)."""
    replay = timing.replay_time(dev, timing.compile_calls(dev, build, n), n, min_s)
    return replay.us_per_call, replay.gpu_bound


def measure(label: str, call, build, work: float, unit: str, torch_us=None, extra=None, n: int = N_CALLS) -> dict:
    """One candidate: both times, throughput (work per µs: bytes -> GB/s, flops -> TFLOP/s) and torch ratios."""
    r = {"label": label}
    try:
        r["span_us"], r["kernel_us"] = span_us(call, n)
        r["replay_us"], r["gpu_bound"] = replay_us(build, n)
    except Exception as e:  # noqa: BLE001 - one failing candidate must not end the run
        r["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        print(f"  FAIL {label}: {r['error']}", flush=True)
        return r
    scale = 1e3 if unit == "GB/s" else 1e6
    for how in ("span", "replay"):
        r[f"{how}_thru"] = work / r[f"{how}_us"] / scale
        if torch_us:
            r[f"{how}_x_torch"] = torch_us / r[f"{how}_us"]
    if extra:
        r.update(extra)
    tor = f" x_torch span {r.get('span_x_torch', float('nan')):.3f} replay {r.get('replay_x_torch', float('nan')):.3f}"
    print(f"  {label:44} span {r['span_us']:8.1f} us replay {r['replay_us']:8.1f} us ({r['replay_thru']:8.1f} {unit})"
          f"{tor if torch_us else ''} {r['kernel_us']}{'' if r['gpu_bound'] else ' HOST-BOUND'}"
          + (f" diff {r['diff_vs_planned']:.1e}" if "diff_vs_planned" in r else ""), flush=True)
    return r


# ---- warm: the first shape ----

def section_warm():
    """Shape 1 of the decode grid timed in 20-call recordings for 1.5 s before torch exists, then after
    torch's CUDA context, then after 1 s of steady copies; nvidia-smi clocks at each point."""
    s = Shape("decode", 1, 256 if SMALL else 1024, 8 if SMALL else 32, 2 if SMALL else 8, 64, "f16")
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(-1, 1, (s.S if i == 0 else s.L, s.Hq if i == 0 else s.Hkv, s.D)).astype(np.float16)
              for i in range(3)]
    q, k, v = (dev.tensor(a) for a in arrays)
    out = wg.ops.attention(q, k, v, causal=True)
    dev.sync()

    def trace(seconds):
        points = []
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            with dev.record(profile=True) as rec:
                for _ in range(N_CALLS):
                    wg.ops.attention(q, k, v, causal=True, out=out)
            points.append((round(time.perf_counter() - t0, 3), round(rec.profile().span_us / N_CALLS, 2)))
        return points

    res = {"shape": s.label(), "clocks_idle": warmup.gpu_clocks()}
    res["before_torch"] = trace(1.5)
    res["clocks_after_1.5s"] = warmup.gpu_clocks()
    res["torch_context"] = warmup.init_torch_cuda() if TORCH else False
    res["after_torch"] = trace(0.5)
    res["clocks_after_torch"] = warmup.gpu_clocks()
    warmup.steady_work(dev, 1.0)
    res["after_steady_work"] = trace(0.5)
    res["clocks_after_steady_work"] = warmup.gpu_clocks()
    RES["warm"] = res
    for key in ("before_torch", "after_torch", "after_steady_work"):
        pts = res[key]
        print(f"warm {key:18} first {pts[0][1]:7.1f} us  at 0.5 s {next((p[1] for p in pts if p[0] >= 0.5), pts[-1][1]):7.1f}"
              f"  last {pts[-1][1]:7.1f} us ({len(pts)} batches)", flush=True)
    print(f"warm clocks: idle {res['clocks_idle']} | 1.5 s {res['clocks_after_1.5s']} | torch "
          f"{res['clocks_after_torch']} | steady {res['clocks_after_steady_work']}", flush=True)
    save()


# ---- decode ----

def section_decode():
    lengths = LENGTHS or ((256, 1024) if SMALL else (1024, 4096, 16384, 32768))
    heads = HEADS or (((8, 2), (4, 4)) if SMALL else ((32, 8), (16, 16)))
    dims = DIMS or ((64,) if SMALL else (64, 128))
    rows = RES.setdefault("decode", [])
    for L in lengths:
        for hq, hkv in heads:
            for D in dims:
                s = Shape("decode", 1, L, hq, hkv, D, "f16")
                g = hq // hkv
                rng = np.random.default_rng(0)
                arrays = [rng.uniform(-1, 1, (1, hq, D)).astype(np.float16)] + \
                         [rng.uniform(-1, 1, (L, hkv, D)).astype(np.float16) for _ in range(2)]
                tensors = [dev.tensor(a) for a in arrays]
                row = {"shape": s.label(), "L": L, "Hq": hq, "Hkv": hkv, "D": D, "bytes": bytes_moved(s), "res": []}
                print(s.label(), flush=True)
                ref = None
                if TORCH:
                    tr = torch_ref.run_sdpa(s, *arrays, reps=N_CALLS)
                    row["torch_us"], ref = tr["torch_ms"] * 1e3, tr["output"]
                    print(f"  {'torch':44} {row['torch_us']:8.1f} us", flush=True)
                plan_name = None
                variants = [None, f"decode_splitk_g{g}_f16", f"decode_fused_g{g}_f16"]
                variants += [f"x_fused_g{g}_f16_{tag}" for tag in FUSED.get(g, {}) if FUSED_CONFIGS]
                for var in variants:
                    try:
                        plan = wg.ops.attention_plan(*tensors, causal=True, variant=var)
                    except wg.WgraphError as e:
                        row["res"].append({"label": var, "error": f"{type(e).__name__}: {e}"})
                        continue
                    if var is not None and var == plan_name:
                        continue
                    out = wg.ops.attention(*tensors, causal=True, variant=var)

                    def build(gr, i, var=var):
                        if i == 0:
                            build.st = timing.states(gr, arrays, ("f16",) * 3)
                        return wg.ops.attention(*build.st, causal=True, variant=var)

                    r = measure(f"{plan.variant}{' (planned)' if var is None else ''}",
                                lambda: wg.ops.attention(*tensors, causal=True, variant=var, out=out), build,
                                bytes_moved(s), "GB/s", row.get("torch_us"),
                                {"variant": plan.variant, "planned": var is None, "workgroups": plan.workgroups})
                    if ref is not None and "error" not in r:
                        r["diff"] = float(np.max(np.abs(out.numpy().astype(np.float32) - ref)))
                    row["res"].append(r)
                    if var is None:
                        plan_name = plan.variant
                rows.append(row)
                save()
                del tensors


# ---- batched ----

def section_batched():
    hq, hkv, D, L = (8, 2, 32, 128) if SMALL else (32, 8, 128, int(os.environ.get("KV", "4096")))
    if HEADS:
        hq, hkv = HEADS[0]
    if DIMS:
        D = DIMS[0]
    rows = RES.setdefault("batched", [])
    for B in ((1, 8) if SMALL else BATCHES):
        rng = np.random.default_rng(0)
        q = rng.uniform(-1, 1, (B, 1, hq, D)).astype(np.float16)
        kc = rng.uniform(-1, 1, (B, L, hkv, D)).astype(np.float16)
        vc = rng.uniform(-1, 1, (B, L, hkv, D)).astype(np.float16)
        lens = np.full(B, L, np.uint32)
        Q, K, V, LENS = dev.tensor(q), dev.tensor(kc), dev.tensor(vc), dev.tensor(lens)
        work = 2 * B * L * hkv * D * 2 + 2 * B * hq * D * 2
        row = {"label": f"kvcache B={B} kv={L} {hq}/{hkv} D={D} f16", "B": B, "bytes": work, "res": []}
        print(row["label"], flush=True)
        if TORCH:
            from wgraph.bench.batched import BatchedShape, torch_sdpa
            t = torch_sdpa(BatchedShape("decode", (L,) * B, hq, hkv, D, "f16"), (q, kc, vc), N_CALLS)
            row.update(torch_us=t["torch_ms"] * 1e3, torch_how=t["torch_how"])
            print(f"  {'torch (' + t['torch_how'] + ')':44} {row['torch_us']:8.1f} us", flush=True)
        g = hq // hkv
        for var in (None, f"batched_fused_g{g}_f16", f"batched_splitk_g{g}_f16",
                    *[f"x_bfused_g{g}_f16_{tag}" for tag in FUSED.get(g, {}) if FUSED_CONFIGS],
                    *(["batched_single_f16"] + [f"x_bsingle_f16_{tag}" for tag in SINGLE] if L <= 512 else [])):
            try:
                out = wg.ops.attention_kvcache(Q, K, V, cache_seqlens=LENS, causal=True, variant=var)
            except wg.WgraphError as e:
                row["res"].append({"label": var, "error": f"{type(e).__name__}: {e}"})
                continue
            got = out.numpy().astype(np.float64)
            if var is None:   # the planned kernel runs first: every candidate is compared with its output
                planned_out = got
            diff = float(np.abs(got - planned_out).max())

            def build(gr, i, var=var):
                if i == 0:
                    build.st = timing.states(gr, (q, kc, vc, lens), ("f16", "f16", "f16", "u32"))
                a, b_, c, ln = build.st
                return wg.ops.attention_kvcache(a, b_, c, cache_seqlens=ln, causal=True, variant=var)

            row["res"].append(measure(var or "planned", lambda: wg.ops.attention_kvcache(
                Q, K, V, cache_seqlens=LENS, causal=True, variant=var, out=out), build, work, "GB/s",
                row.get("torch_us"), extra={"diff_vs_planned": diff}))
        if B == 1:   # the single-sequence kernel on the same shape
            q1, k1, v1 = Q.reshape(1, hq, D), K.reshape(L, hkv, D), V.reshape(L, hkv, D)
            out1 = wg.ops.attention(q1, k1, v1, causal=True)

            def build1(gr, i):
                if i == 0:
                    build1.st = timing.states(gr, (q[0], kc[0], vc[0]), ("f16",) * 3)
                return wg.ops.attention(*build1.st, causal=True)

            row["single"] = measure("single-sequence attention (planned)", lambda: wg.ops.attention(
                q1, k1, v1, causal=True, out=out1), build1, work, "GB/s", row.get("torch_us"))
        rows.append(row)
        save()
    if not VARLEN_ROWS:
        return
    # varlen prefill vs the single-sequence flash kernel on the same total rows
    lens = (16, 32, 8, 24) if SMALL else (512, 1024, 256, 768, 512, 1024, 128, 896)
    n = sum(lens)
    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, (n, hq, D)).astype(np.float16)
    k = rng.uniform(-1, 1, (n, hkv, D)).astype(np.float16)
    v = rng.uniform(-1, 1, (n, hkv, D)).astype(np.float16)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.uint32)
    Q, K, V, CU = dev.tensor(q), dev.tensor(k), dev.tensor(v), dev.tensor(cu)
    m = max(lens)
    work = sum(4.0 * x * x * hq * D / 2 for x in lens)
    row = {"label": f"varlen B={len(lens)} rows={n} {hq}/{hkv} D={D} f16", "flops": work, "res": []}
    print(row["label"], flush=True)
    for var in (None, *[f"x_bflash_d128_f16_{tag}" for tag in VARLEN]):
        out = wg.ops.attention_varlen(Q, K, V, CU, CU, max_seqlen_q=m, max_seqlen_k=m, causal=True, variant=var)

        def build(gr, i, var=var):
            if i == 0:
                build.st = timing.states(gr, (q, k, v, cu), ("f16", "f16", "f16", "u32"))
            a, b_, c, cc = build.st
            return wg.ops.attention_varlen(a, b_, c, cc, cc, max_seqlen_q=m, max_seqlen_k=m, causal=True, variant=var)

        row["res"].append(measure(var or "planned", lambda: wg.ops.attention_varlen(
            Q, K, V, CU, CU, max_seqlen_q=m, max_seqlen_k=m, causal=True, variant=var, out=out), build, work, "TFLOP/s",
            n=5))
    out1 = wg.ops.attention(Q, K, V, causal=True)   # one sequence of all the rows: 4x the pairs, same kernel class
    s1 = Shape("prefill", n, n, hq, hkv, D, "f16")

    def build1(gr, i):
        if i == 0:
            build1.st = timing.states(gr, (q, k, v), ("f16",) * 3)
        return wg.ops.attention(*build1.st, causal=True)

    row["single"] = measure(f"single-sequence flash, {n} rows", lambda: wg.ops.attention(Q, K, V, causal=True, out=out1),
                            build1, flops(s1), "TFLOP/s", n=5)
    rows.append(row)
    save()


# ---- f32 prefill ----

def section_prefill():
    rows = RES.setdefault("prefill", [])
    for S in ((64,) if SMALL else (2048, 4096)):
        s = Shape("prefill", S, S, 4 if SMALL else 16, 4 if SMALL else 16, 128, "f32")
        rng = np.random.default_rng(0)
        arrays = [rng.uniform(-1, 1, (S, s.Hq, s.D)).astype(np.float32) for _ in range(3)]
        tensors = [dev.tensor(a) for a in arrays]
        row = {"shape": s.label(), "S": S, "flops": flops(s), "res": []}
        print(s.label(), flush=True)
        ref = None
        if TORCH:
            tr = torch_ref.run_sdpa(s, *arrays, reps=3)
            row["torch_us"], ref = tr["torch_ms"] * 1e3, tr["output"]
            print(f"  {'torch':44} {row['torch_us']:8.1f} us {flops(s) / row['torch_us'] / 1e6:.2f} TFLOP/s", flush=True)
        for var in (None, *[f"x_flash_d128_f32_{tag}" for tag in PREFILL]):
            out = wg.ops.attention(*tensors, causal=True, variant=var)

            def build(gr, i, var=var):
                if i == 0:
                    build.st = timing.states(gr, arrays, ("f32",) * 3)
                return wg.ops.attention(*build.st, causal=True, variant=var)

            r = measure(var or "planned", lambda: wg.ops.attention(*tensors, causal=True, variant=var, out=out), build,
                        flops(s), "TFLOP/s", row.get("torch_us"), n=4)
            if ref is not None and "error" not in r:
                r["diff"] = float(np.max(np.abs(out.numpy() - ref)))
            row["res"].append(r)
        rows.append(row)
        save()


t_start = time.perf_counter()
if "warm" in SECTIONS:
    section_warm()
if TORCH:
    warmup.init_torch_cuda()
RES["prepare"] = warmup.prepare(dev, TORCH)
for name in ("decode", "batched", "prefill"):
    if name in SECTIONS:
        t0 = time.perf_counter()
        globals()[f"section_{name}"]()
        print(f"section {name}: {time.perf_counter() - t0:.0f} s", flush=True)
RES["elapsed_s"] = time.perf_counter() - t_start
save()
print(f"done in {RES['elapsed_s']:.0f} s; wrote {OUT / 'attention_ab.json'}", flush=True)
