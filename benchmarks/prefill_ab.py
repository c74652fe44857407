"""A/B of prefill attention kernels on one GPU in one command (run from the project root; <= BUDGET_S seconds):
the planned kernel, the GEMM-shaped flash kernel (attention_prefill_gemm.wgsl: its registry entry and the
configurations in CONFIGS, experimental registry entries in a copy of wgraph/shaders/, never planned) and torch
SDPA, on causal prefill at 16/16 and 32/8 heads, D 64 and 128, f32 and f16, S 512..4096 (the issue-25 target rows
first); then varlen prefill (8 ragged sequences, 5120 rows, 32/8 D128 f16) beside the single-sequence kernels on
one 5120-row sequence, the batched GEMM-shaped kernel (attention_batched_gemm.wgsl) and its configurations
beside the planned one. The FMA peak (wgraph/bench/fma.py) is measured in the same run.

Every GPU time is a timestamp span: one recording of N calls back to back, from the first dispatch's start to the
last one's end, the median of 3 recordings. Each candidate's output is compared with the planned kernel's (and
torch's where it runs): `diff` is the max abs difference. Prints per shape every configuration best first (µs,
TFLOP/s, ratio to torch, fraction of the FMA peak of its dtype), then per planning class (head-dim class x dtype)
the configuration with the least total time over the class's shapes. Writes $OUT/prefill_ab.json.
Env: SMALL=1 a smoke run on lavapipe (tiny shapes); BUDGET_S (150): past it, the shapes left run the planned
kernel and torch only; N (4): calls per recording; SECTIONS ("prefill,varlen"); CONFIGS: other candidates,
"tag:KEY=V,KEY=V;..." (KEY: a define of attention_prefill_gemm.wgsl or WG, the workgroup size), applied to both
head-dim classes; and the LOOPS candidates (the body's unrolled loops as run-time loops: text edits; LOOPS=0 leaves
them out)."""
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

import ab_registry

SMALL = os.environ.get("SMALL") == "1"
OUT = Path(os.environ.get("OUT", "/tmp/prefill_ab"))
OUT.mkdir(parents=True, exist_ok=True)
BUDGET_S = float(os.environ.get("BUDGET_S", "150"))
N_CALLS = int(os.environ.get("N", "2" if SMALL else "4"))
SECTIONS = os.environ.get("SECTIONS", "prefill,varlen").split(",")
EXP = Path("/tmp/prefill_ab_shaders")

# Candidates beside each class's registry entry (BLOCK_M 64, BLOCK_N 64, 4 x 4 per thread, 256 threads: 16 row x
# 16 column threads, next chunk prefetched into registers). Each moves one thing the kernel's time depends on:
# global-load latency (no prefetch); barriers per tile (bigger D/V chunks);
# workgroup-memory wavefronts per FMA (8 column threads: a warp's K and V reads are 128 bytes, one wavefront;
# 8 rows a thread: each K vec4 feeds 8 rows); registers and workgroups per SM (128 threads); filling 132 SMs at
# S = 512 (32-row blocks).
CONFIGS = {
    "nopf": dict(PREFETCH="false"),
    "dc8_vc16": dict(D_CHUNK=8, V_CHUNK=16),
    "ct8": dict(BLOCK_M=128, BLOCK_N=32, V_CHUNK=8),
    "ct8_dc8": dict(BLOCK_M=128, BLOCK_N=32, D_CHUNK=8, V_CHUNK=16),
    "wg128": dict(WG=128, BLOCK_N=32, V_CHUNK=8),
    "tm8_bn32": dict(BLOCK_M=128, ROWS_PER_THREAD=8, BLOCK_N=32, KEYS_PER_THREAD=2, V_CHUNK=8),
    "wg128_tm8": dict(WG=128, BLOCK_M=128, ROWS_PER_THREAD=8, BLOCK_N=32, KEYS_PER_THREAD=4, V_CHUNK=8),
    "bm32": dict(WG=128, BLOCK_M=32, V_CHUNK=8),
}
if os.environ.get("CONFIGS"):
    CONFIGS = {}
    for item in os.environ["CONFIGS"].split(";"):
        tag, _, kv = item.partition(":")
        CONFIGS[tag] = {k: int(v) if v.isdigit() else v for k, v in (p.split("=") for p in kv.split(","))}
if SMALL:
    CONFIGS = dict(list(CONFIGS.items())[:2])

FLAT = ab_registry.copy_shaders(EXP)  # every kernel's entry, expanded


def exp_entry(src: str, name: str, config: dict) -> str:
    """Kernel `src`'s expanded registry entry renamed with `config` applied (WG: the workgroup size; FILE: the
    kernel's main file; anything else a define); it stays experimental, so only `variant=` runs it."""
    e = {**FLAT[src], "experimental": True, "defines": dict(FLAT[src].get("defines", {}))}
    for key, value in config.items():
        if key == "WG":
            e["workgroup_size"] = [value, 1, 1]
        elif key == "FILE":
            e["file"] = value
        else:
            e["defines"][key] = str(value)
    return ab_registry.toml_entry(name, e)


# Candidates that edit the kernel's text: the body's unrolled loops over a chunk's head-dim vec4s (S = Q K^T) and
# over a V chunk's keys (P V) as run-time loops, so the compiler hoists fewer workgroup-memory loads into registers:
# 167 registers a thread x 256 threads is one workgroup an SM (h100-prefill-decode-pipeline-stats-1206.json), and
# the QK side costs 4x the P.V FMAs (h100-prefill-ablation-1206.log). tag -> (QK loop, P.V loop) run-time.
LOOPS = {"qkloop": (True, False), "pvloop": (False, True), "loops": (True, True)}
if os.environ.get("LOOPS") == "0":
    LOOPS = {}
BODY = (EXP / "attention_gemm_body.wgsl").read_text()
GEMM_MAIN = FLAT["prefill_gemm_d128_f32"]["file"]


def loop_body(qk: bool, pv: bool) -> str:
    """attention_gemm_body.wgsl with the chosen //!repeat blocks as run-time loops (the same sums, same order)."""
    text = BODY
    if qk:
        text = ab_registry.sub(text, "//!repeat c DC4\n            {\n",
                               "            for (var c: u32 = 0u; c < DC4; c++) {\n")
        text = ab_registry.sub(text, "            }\n//!end\n            workgroupBarrier();             // the chunk",
                               "            }\n            workgroupBarrier();             // the chunk")
        text = ab_registry.sub(text, ", ${c}u)];", ", c)];", 2)
    if pv:
        text = ab_registry.sub(text, "//!repeat kk VC\n                {\n",
                               "                for (var kk: u32 = 0u; kk < VC; kk++) {\n", 2)
        text = ab_registry.sub(text, "                }\n//!end\n            } else {",
                               "                }\n            } else {")
        text = ab_registry.sub(text, "                }\n//!end\n            }\n            workgroupBarrier();",
                               "                }\n            }\n            workgroupBarrier();")
        text = ab_registry.sub(text, "ps_at(k0 + ${kk}u,", "ps_at(k0 + kk,", 2)
        text = ab_registry.sub(text, "vs_at(${kk}u,", "vs_at(kk,", 2)
    return text


for tag, (qk, pv) in LOOPS.items():
    (EXP / f"x_gemm_body_{tag}.wgsl").write_text(loop_body(qk, pv))
    (EXP / f"x_prefill_gemm_{tag}.wgsl").write_text(ab_registry.sub(
        (EXP / GEMM_MAIN).read_text(), "//!include attention_gemm_body.wgsl", f"//!include x_gemm_body_{tag}.wgsl"))
TEXT_CONFIGS = {tag: {"FILE": f"x_prefill_gemm_{tag}.wgsl"} for tag in LOOPS}


def cand(D: int, dt: str, tag: str) -> str:
    return f"x_gemm_d{D}_{dt}_{tag}"


_extra = [exp_entry(f"prefill_gemm_d{D}_{dt}", cand(D, dt, tag), conf)
          for D in (64, 128) for dt in ("f32", "f16") for tag, conf in {**CONFIGS, **TEXT_CONFIGS}.items()]
_extra += [exp_entry("batched_gemm_d128_f16", f"x_bgemm_d128_f16_{tag}", conf) for tag, conf in CONFIGS.items()]
(EXP / "registry" / "zz_prefill_ab.toml").write_text("\n\n".join(_extra) + "\n")

import wgraph.kernels.registry as R  # noqa: E402

R.SHADER_DIR = EXP
import wgraph as wg  # noqa: E402
from wgraph.bench import torch_ref, warmup  # noqa: E402
from wgraph.bench.fma import fma_peak  # noqa: E402
from wgraph.bench.grids import Shape, flops  # noqa: E402
from wgraph.ops import attention_loops  # noqa: E402
from wgraph.ops.core import ceil_div  # noqa: E402
from wgraph.ops.cpu_limits import loop  # noqa: E402


def loop_bound(qk: bool, pv: bool):
    """A CPU adapter's loop count of a LOOPS candidate: the planned GEMM file's count (attention_loops) plus, in each
    tile, the run-time loops' trips: DC4 in each head-dim chunk (qk), VC in each V chunk (pv)."""
    planned = attention_loops.BOUNDS[GEMM_MAIN]

    def bound(k, f, caps) -> int:
        bm, bn, dc4, vc, row4 = (attention_loops.kconst(k, n) for n in ("BLOCK_M", "BLOCK_N", "DC4", "VC", "ROW4"))
        inner = (row4 // dc4) * loop(dc4) * qk + (bn // vc) * loop(vc) * pv
        return planned(k, f, caps) + ceil_div(f.kv_span + bm - 1, bn) * inner
    return bound


for _tag, (_qk, _pv) in LOOPS.items():
    attention_loops.BOUNDS[f"x_prefill_gemm_{_tag}.wgsl"] = loop_bound(_qk, _pv)
ALL_CONFIGS = {**CONFIGS, **TEXT_CONFIGS}

T0 = time.perf_counter()
dev = wg.default_device()
print(dev.caps, flush=True)
TORCH = torch_ref.probe()["available"]
RES = {"caps": str(dev.caps), "configs": ALL_CONFIGS, "budget_s": BUDGET_S, "n_calls": N_CALLS, "rows": []}


def save():
    (OUT / "prefill_ab.json").write_text(json.dumps(RES, indent=1, default=str))


def span_us(call, n: int) -> float:
    """Median over 3 recordings of (first dispatch start .. last dispatch end) / n, after one warm recording."""
    with dev.record():
        for _ in range(n):
            call()
    dev.sync()
    spans = []
    for _ in range(3):
        with dev.record(profile=True) as rec:
            for _ in range(n):
                call()
        spans.append(rec.profile().span_us / n)
    return statistics.median(spans)


def over_budget() -> bool:
    return time.perf_counter() - T0 > BUDGET_S


def shapes():
    """The issue's target rows first (16/16 D128 at S >= 2048), then the rest of the grid, long S first."""
    if SMALL:
        return [Shape("prefill", s, s, hq, hkv, d, dt) for s in (40, 96) for (hq, hkv) in ((2, 2), (4, 1))
                for d in (64, 128) for dt in ("f32", "f16")][:6]
    out = []
    for S in (2048, 4096, 1024, 512):
        for hq, hkv, D in ((16, 16, 128), (32, 8, 64), (32, 8, 128), (16, 16, 64)):
            for dt in ("f32", "f16"):
                out.append(Shape("prefill", S, S, hq, hkv, D, dt))
    first = [s for s in out if (s.Hq, s.D) == (16, 128) and s.S >= 2048]
    return first + [s for s in out if s not in first]


def candidates(D: int, dt: str, full: bool):
    """(label, variant) pairs: planned, the registry's GEMM entry, the configurations."""
    cls = 64 if D <= 64 else 128
    out = [("planned", None)]
    if full:
        out.append(("gemm", f"prefill_gemm_d{cls}_{dt}"))
        out += [(f"gemm_{tag}", cand(cls, dt, tag)) for tag in [*CONFIGS, *TEXT_CONFIGS]]
    return out


def fmt(r: dict, torch_us) -> str:
    if "error" in r:
        return f"    {r['label']:20} FAIL {r['error'][:150]}"
    x = f" x_torch {torch_us / r['us']:.3f}" if torch_us else ""
    d = "".join(f" {name} {r[key]:.1e}" for name, key in (("d_torch", "diff"), ("d_planned", "diff_vs_planned"))
                if key in r)
    wrong = " WRONG?" if r.get("diff_vs_planned", 0.0) > r.get("tol", float("inf")) else ""
    return (f"    {r['label']:20} {r['us']:10.1f} us {r['tflops']:7.2f} TFLOP/s{x} fma {r['of_fma']:.3f}{d}{wrong} "
            f"[{r['variant']}]")


def run_prefill(peaks: dict):
    for s in shapes():
        full = not over_budget()
        rng = np.random.default_rng(0)
        npdt = np.float16 if s.dtype == "f16" else np.float32
        arrays = [rng.uniform(-1, 1, (s.S, s.Hq if i == 0 else s.Hkv, s.D)).astype(npdt) for i in range(3)]
        tensors = [dev.tensor(a) for a in arrays]
        work = flops(s)
        row = {"shape": s.label(), "S": s.S, "Hq": s.Hq, "Hkv": s.Hkv, "D": s.D, "dtype": s.dtype, "flops": work,
               "full": full, "res": []}
        ref = None
        if TORCH:
            try:
                tr = torch_ref.run_sdpa(s, *arrays, reps=3)
                row["torch_us"], ref = tr["torch_ms"] * 1e3, tr["output"]
            except Exception as e:  # noqa: BLE001 - torch failing must not end the run
                row["torch_error"] = f"{type(e).__name__}: {e}"
        planned_out = None
        for label, var in candidates(s.D, s.dtype, full):
            r = {"label": label}
            try:
                plan = wg.ops.attention_plan(*tensors, causal=True, variant=var)
                r["variant"] = plan.variant
                out = wg.ops.attention(*tensors, causal=True, variant=var)
                got = out.numpy().astype(np.float32)
                r["us"] = span_us(lambda: wg.ops.attention(*tensors, causal=True, variant=var, out=out), N_CALLS)
            except Exception as e:  # noqa: BLE001 - one failing candidate must not end the run
                r["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                row["res"].append(r)
                continue
            r["tflops"] = work / r["us"] / 1e6
            r["of_fma"] = r["tflops"] / peaks[s.dtype] if peaks.get(s.dtype) else float("nan")
            if planned_out is None:
                planned_out = got
            else:
                r["diff_vs_planned"] = float(np.max(np.abs(got - planned_out)))
                r["tol"] = 2e-2 if s.dtype == "f16" else 1e-4   # two correct kernels' outputs differ by less
            if ref is not None:
                r["diff"] = float(np.max(np.abs(got - ref)))
            row["res"].append(r)
        print(f"{s.label()}" + (f"  torch {row['torch_us']:.1f} us {work / row['torch_us'] / 1e6:.2f} TFLOP/s"
                                if "torch_us" in row else "") + ("" if full else "  (budget: planned only)"),
              flush=True)
        for r in sorted(row["res"], key=lambda r: r.get("us", float("inf"))):
            print(fmt(r, row.get("torch_us")), flush=True)
        RES["rows"].append(row)
        save()
        del tensors


def run_varlen(peaks: dict):
    hq, hkv, D = (8, 2, 128) if SMALL else (32, 8, 128)
    lens = (16, 32, 8, 24) if SMALL else (512, 1024, 256, 768, 512, 1024, 128, 896)
    n, m = sum(lens), max(lens)
    rng = np.random.default_rng(0)
    q, k, v = (rng.uniform(-1, 1, (n, h, D)).astype(np.float16) for h in (hq, hkv, hkv))
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.uint32)
    Q, K, V, CU = dev.tensor(q), dev.tensor(k), dev.tensor(v), dev.tensor(cu)
    work = sum(4.0 * x * x * hq * D / 2 for x in lens)
    row = {"shape": f"varlen B={len(lens)} rows={n} {hq}/{hkv} D={D} f16", "flops": work, "res": []}
    planned_out = None
    for label, var in (("varlen planned", None), ("varlen gemm", "batched_gemm_d128_f16"),
                       *[(f"varlen gemm_{t}", f"x_bgemm_d128_f16_{t}") for t in CONFIGS]):
        r = {"label": label, "variant": var or "planned"}
        try:
            out = wg.ops.attention_varlen(Q, K, V, CU, CU, max_seqlen_q=m, max_seqlen_k=m, causal=True, variant=var)
            got = out.numpy().astype(np.float32)
            if planned_out is None:
                planned_out = got
            else:
                r["diff_vs_planned"], r["tol"] = float(np.max(np.abs(got - planned_out))), 2e-2
            r["us"] = span_us(lambda: wg.ops.attention_varlen(Q, K, V, CU, CU, max_seqlen_q=m, max_seqlen_k=m,
                                                              causal=True, variant=var, out=out), N_CALLS)
            r["tflops"] = work / r["us"] / 1e6
            r["of_fma"] = r["tflops"] / peaks["f16"] if peaks.get("f16") else float("nan")
        except Exception as e:  # noqa: BLE001
            r["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        row["res"].append(r)
    # one sequence of all the rows: 4x the (query, key) pairs, the single-sequence kernels' TFLOP/s to match
    s1 = Shape("prefill", n, n, hq, hkv, D, "f16")
    for label, var in (("single planned", None), ("single gemm", "prefill_gemm_d128_f16"),
                       ("single flash", "prefill_flash_d128_f16"),   # the issue-25 target's reference
                       *[(f"single gemm_{t}", cand(128, "f16", t)) for t in CONFIGS]):
        r = {"label": label, "variant": var or "planned"}
        try:
            out = wg.ops.attention(Q, K, V, causal=True, variant=var)
            got = out.numpy().astype(np.float32)
            if var is None:
                planned_out = got
            else:
                r["diff_vs_planned"], r["tol"] = float(np.max(np.abs(got - planned_out))), 2e-2
            r["us"] = span_us(lambda: wg.ops.attention(Q, K, V, causal=True, variant=var, out=out), N_CALLS)
            r["tflops"] = flops(s1) / r["us"] / 1e6
            r["of_fma"] = r["tflops"] / peaks["f16"] if peaks.get("f16") else float("nan")
        except Exception as e:  # noqa: BLE001
            r["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        row["res"].append(r)
    print(row["shape"] + " (single: one sequence of all the rows)", flush=True)
    for r in row["res"]:
        print(fmt(r, None), flush=True)
    RES["varlen"] = row
    save()


def summary():
    """Per planning class (head-dim class x dtype): total µs of each configuration over the shapes all ran."""
    print("\nper planning class: total us over the shapes every configuration ran (best first)")
    classes = {}
    for row in RES["rows"]:
        if not row["full"]:
            continue
        key = (64 if row["D"] <= 64 else 128, row["dtype"])
        for r in row["res"]:
            if "us" in r:
                classes.setdefault(key, {}).setdefault(r["label"], []).append((row["shape"], r["us"]))
    RES["classes"] = {}
    for (cls, dt), confs in sorted(classes.items()):
        n = max(len(v) for v in confs.values())
        totals = {label: sum(us for _, us in v) for label, v in confs.items() if len(v) == n}
        ranked = sorted(totals.items(), key=lambda kv: kv[1])
        RES["classes"][f"d{cls}_{dt}"] = ranked
        base = totals.get("planned")
        print(f"  d{cls} {dt} ({n} shapes): " + ", ".join(
            f"{label} {t / 1e3:.2f} ms" + (f" ({base / t:.2f}x planned)" if base else "") for label, t in ranked)
            + f"  -> winner {ranked[0][0]} {ALL_CONFIGS.get(ranked[0][0].removeprefix('gemm_'), '')}")
    targets()


def targets():
    """Issue 25's prefill targets against the best configuration of each row (wrong outputs left out)."""
    print("\ntargets (best correct configuration; planned beside it):")
    ok = lambda r: "us" in r and r.get("diff_vs_planned", 0.0) <= r.get("tol", float("inf"))  # noqa: E731
    for row in RES["rows"]:
        best = min((r for r in row["res"] if ok(r)), key=lambda r: r["us"], default=None)
        planned = next((r for r in row["res"] if r["label"] == "planned" and "us" in r), None)
        if best is None or planned is None:
            continue
        if (row["Hq"], row["D"], row["dtype"]) == (16, 128, "f32") and row["S"] >= 2048 and "torch_us" in row:
            print(f"  f32 16/16 D128 S={row['S']}: {best['label']} {row['torch_us'] / best['us']:.3f}x torch "
                  f"(planned {row['torch_us'] / planned['us']:.3f}x; target 0.6x)")
        if row["dtype"] == "f16" and PEAKS.get("f16"):
            print(f"  f16 {row['Hq']}/{row['Hkv']} D{row['D']} S={row['S']}: {best['label']} {best['of_fma']:.3f} of the "
                  f"f16 FMA peak (planned {planned['of_fma']:.3f}; target 0.40)")
    v = RES.get("varlen")
    if v:
        got = {r["label"]: r for r in v["res"] if ok(r)}
        bv = min((r for k, r in got.items() if k.startswith("varlen")), key=lambda r: r["us"], default=None)
        bs = got.get("single planned")
        for ref in (got.get("single flash"), bs):   # the target's reference (the flash kernel), then the planned
            if bv and ref:
                print(f"  varlen: {bv['label']} {bv['tflops']:.2f} TFLOP/s against the single-sequence {ref['label']} "
                      f"kernel's {ref['tflops']:.2f} on {v['shape']} ({bv['tflops'] / ref['tflops']:.2f}x; target >= 1x "
                      "the flash kernel's)")


if TORCH:
    warmup.init_torch_cuda()
RES["prepare"] = warmup.prepare(dev, TORCH)
RES["fma"] = fma_peak(dev, target_s=0.05)
PEAKS = {"f32": max((r["tflops"] for r in RES["fma"] if r["status"] == "ok" and r["type"] == "f32"), default=None),
         "f16": max((r["tflops"] for r in RES["fma"] if r["status"] == "ok" and "f16" in r["type"]), default=None)}
RES["fma_peak_tflops"] = PEAKS
print(f"FMA peak TFLOP/s: {PEAKS}", flush=True)
if "prefill" in SECTIONS:
    run_prefill(PEAKS)
if "varlen" in SECTIONS:
    run_varlen(PEAKS)
summary()
RES["elapsed_s"] = time.perf_counter() - T0
save()
print(f"done in {RES['elapsed_s']:.0f} s; wrote {OUT / 'prefill_ab.json'}", flush=True)
