"""A/B of linear_rope_kv_append configurations on one GPU in one run (run from the project root): the decode
step's fused QKV GEMV with RoPE and the K/V append (Llama-3.2-1B and Llama-3.1-8B shapes, f16 weights and f16
caches, one row, RMSNorm fused) under the planned variant and under candidate GEMV configurations, beside the
plain `linear(norm=)` GEMV over the same weight (what the fused op would cost without its epilogue); the copy
kernel's ceiling for the same bytes too. Calls are chained in one pass and cycle over copies of W that do not
fit the GPU's last-level cache (wgraph/bench/gemv.py's timing).

Candidates are experimental registry entries (a copy of wgraph/shaders/ with one more TOML file), forced by
replacing the op's planner for the timed calls. Writes $OUT/rope_ab.json; prints each shape's configurations by
GPU time. SMALL=1: a smoke run (lavapipe-sized shapes, f32); CANDIDATES="lanes,ft,unroll,threads;..." others."""
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import ab_registry

SMALL = os.environ.get("SMALL") == "1"
OUT = Path(os.environ.get("OUT", "/tmp/rope_ab"))
OUT.mkdir(parents=True, exist_ok=True)
EXP = Path("/tmp/rope_ab_shaders")
CANDIDATES = [(64, 2, 4, 256), (64, 2, 2, 256), (128, 2, 2, 256), (256, 2, 1, 256), (64, 4, 2, 256),
              (128, 2, 2, 128), (32, 2, 4, 256)]
if os.environ.get("CANDIDATES"):
    CANDIDATES = [tuple(int(v) for v in c.split(",")) for c in os.environ["CANDIDATES"].split(";")]
if SMALL:
    CANDIDATES = CANDIDATES[:2]
# (name, q heads, kv heads, head dim, hidden)
SHAPES = [("tiny", 4, 2, 32, 256)] if SMALL else [("1B", 32, 8, 64, 2048), ("8B", 32, 8, 128, 4096)]
DT = "f32" if SMALL else "f16"
MAX_SEQ = 512


def config_name(c) -> str:
    lanes, ft, unroll, threads = c
    return f"rope_ab_l{lanes}_f{ft}_u{unroll}_t{threads}"


def write_registry():
    ab_registry.copy_shaders(EXP)
    entries = []
    for c in CANDIDATES:
        lanes, ft, unroll, threads = c
        entries.append(f'[variants.{config_name(c)}]\nmatrix = "gemv_rope_kv"\nop = "linear_rope_kv_append"\n'
                       f'file = "gemv_rope_kv.wgsl"\nentry = "main"\nworkgroup_size = [{threads}]\n'
                       f'features = ["subgroup"]\ndefines = {{ GEMV_ENTRY = "gemv_entry_subgroup.wgsl" }}\n'
                       f'limits = {{ max_rows = 1, lanes = {lanes}, features_per_lane = {ft}, unroll = {unroll} }}\n'
                       f'form = "gemv"\nweight_dtype = "{{wdt}}"\ncache_dtype = "{{kdt}}"\nmin_k = 0\nmin_n = 0\n')
    (EXP / "registry" / "zz_rope_ab.toml").write_text("\n".join(entries))


write_registry()
import wgraph.kernels.registry as R  # noqa: E402

R.SHADER_DIR = EXP
import wgraph as wg  # noqa: E402
import wgraph.ops.linear_rope_kv as LRK  # noqa: E402
from wgraph.bench import gemv, report, timing, weights  # noqa: E402
from wgraph.kernels.registry import kernel  # noqa: E402

dev = wg.default_device()
if not dev.caps.has_subgroups:
    sys.exit(f"{dev.caps.adapter_name} has no subgroups: the candidates need them")
planner = LRK.plan_linear_rope_kv
forced = {"variant": None}


def plan(rows, n, k, weight_dtype, cache_dtype, caps, *, norm=False):
    got = planner(rows, n, k, weight_dtype, cache_dtype, caps, norm=norm)
    if forced["variant"] is None:
        return got
    kv = kernel(forced["variant"])
    return LRK.LinearRopeKVPlan(kv.name, "forced by benchmarks/rope_ab.py", True)


LRK.plan_linear_rope_kv = plan
t0 = time.perf_counter()
copy = gemv.copy_bandwidth(dev, gemv.copy_bytes(dev.caps, "quick" if SMALL else "full"))
print(f"copy kernel: {copy['gbps']:.1f} GB/s", flush=True)
RES = {"meta": report.machine_meta(dev, ["benchmarks/rope_ab.py"]), "copy": copy, "candidates": CANDIDATES, "rows": []}
rng = np.random.default_rng(0)
for name, hq, hkv, d, hidden in SHAPES:
    n = (hq + 2 * hkv) * d
    wbytes = n * hidden * (2 if DT == "f16" else 4)
    copies = 1 if dev.caps.is_cpu else max(1, min(gemv.MAX_COPIES, -(-gemv.CACHE_BYTES // wbytes)))
    ws = []
    for i in range(copies):
        w = dev.empty((n, hidden), DT)
        weights.fill(w, weights.seed_of(f"rope_ab {name} {i}"), weights.scale_for(hidden))
        ws.append(w)
    x = dev.tensor(rng.standard_normal((1, hidden), dtype=np.float32))
    norm = dev.tensor((1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32))
    cos, sin = (dev.tensor(t) for t in wg.ops.rope_tables(MAX_SEQ, d))
    kc, vc = dev.empty((MAX_SEQ, hkv, d), DT), dev.empty((MAX_SEQ, hkv, d), DT)
    pos = dev.tensor(np.array([100], np.uint32))
    q = dev.empty((1, hq, d), "f32")
    y = dev.empty((1, n), "f32")
    state = {"i": 0}

    def fused():
        wg.ops.linear_rope_kv_append(x, ws[state["i"] % copies], cos, sin, (kc, vc), pos, q_heads=hq, norm=norm,
                                     eps=1e-5, out=q)
        state["i"] += 1

    def plain():
        wg.ops.linear(x, ws[state["i"] % copies], norm=norm, eps=1e-5, out=y)
        state["i"] += 1

    todo = [("planned", None, fused), ("plain linear", None, plain)]
    todo += [(config_name(c) + f"_{DT}w_{DT}kv", config_name(c) + f"_{DT}w_{DT}kv", fused) for c in CANDIDATES]
    ceiling = gemv.read_ceiling(dev, wbytes, target_us=300.0 if SMALL else 2000.0)
    timed = {}
    first = None
    for label, variant, call in todo:
        forced["variant"] = variant
        state["i"] = 0
        call()   # on weight copy 0: every fused configuration writes the planned one's q
        if call is fused:
            got = q.numpy()
            first = got if first is None else first
            if not np.allclose(got, first, rtol=1e-4, atol=1e-4):
                sys.exit(f"{label}: q differs from the planned variant's by {np.max(np.abs(got - first))}")
        timing.warm(dev, call, 0.05 if SMALL else 0.2)
        reps = gemv._reps(dev, call, 300.0 if SMALL else 2000.0, 400)
        timed[label] = (call, variant, reps, [])
    for _ in range(3):  # rounds: the configurations take turns
        for label, (call, variant, reps, us) in timed.items():
            forced["variant"] = variant
            us += gemv._gpu_us(dev, call, reps, 1)[0]
    forced["variant"] = None
    rows = []
    for label, (call, variant, reps, us) in timed.items():
        med = statistics.median(us)
        rows.append({"shape": name, "n": n, "k": hidden, "config": label, "gpu_us": med, "gpu_us_all": us,
                     "weight_bytes": wbytes, "fraction_of_copy": wbytes / (med * 1e-6) / 1e9 / copy["gbps"],
                     "read_same_bytes_fraction": ceiling["gbps"] / copy["gbps"],
                     "planned_variant": planner(1, n, hidden, DT, DT, dev.caps, norm=True).variant})
    rows.sort(key=lambda r: r["gpu_us"])
    print(f"\n{name}: W [{n}, {hidden}] {DT}, caches {DT}; a read of the same bytes reaches "
          f"{rows[0]['read_same_bytes_fraction']:.3f} of copy; planned {rows[0]['planned_variant']}")
    for r in rows:
        print(f"  {r['config']:36} {r['gpu_us']:8.2f} us  {r['fraction_of_copy']:.3f} of copy")
    RES["rows"] += rows
    del ws
RES["elapsed_s"] = time.perf_counter() - t0
(OUT / "rope_ab.json").write_text(json.dumps(RES, indent=1, default=str))
print(f"\nwrote {OUT / 'rope_ab.json'} in {RES['elapsed_s']:.0f} s")
