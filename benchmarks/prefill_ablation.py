"""Where the GEMM-shaped prefill attention kernel's time goes (run from the project root on a GPU; under ~3 minutes
on an H200): at f32 16/16 D=128 the planned `prefill_gemm_d128_f32` reaches ~24% of the f32 FMA peak where the
dense GEMM (linear_gemm.wgsl) reaches 57-62% (benchmarks/results/h200-prefill-ab.log). Each ablation is a copy of
the planned kernel (attention_prefill_gemm.wgsl, its body attention_gemm_body.wgsl, its tiles and staging
attention_gemm_tiles.wgsl) whose WGSL is edited by text substitution in a copy of wgraph/shaders/ (experimental
registry entries, forced by `variant=`; the package's shaders are untouched), timed beside the planned kernel:

  A  planned        the planner's kernel for the shape (asserted: prefill_gemm_d{64,128}_{dt}; where the planner
                    picks another kernel the GEMM entry is forced and the row says so)
  B  no_softmax     p = the raw score (masked keys 0): no transform, exp, max/sum butterflies or correction (the
                    o *= corr pass dropped too); the ps writes, their barrier and l (the sum of p) kept
  C  no_pv          the P.V FMAs (and their ps reads) dropped; V still staged (loads, vs stores, barriers), one vs
                    value a chunk folded into o[0] so the loads live; the softmax kept (its l reaches the output)
  D  no_qk          the scores made from the row and key indices: no Q/K staging, loads or QK FMAs; the ps
                    writes, softmax and P.V kept
  E  no_kv_loads    K and V staged from their indices instead of global loads (Q still loaded); barriers, all math
                    and the workgroup-memory traffic kept
  F  staging        only the staging loop: Q/K/V loads, their workgroup-memory stores and every barrier of A
                    (the softmax's two included), no math: one qs/ks/vs value a chunk folded into o[0]
  I  no_barriers    A without any workgroupBarrier (a race: what it computes is meaningless): every load, store
                    and FMA of A, so the time it saves bounds what the barriers cost
  J  no_qk_fmas     the QK FMAs (and their qs/ks reads) dropped, one qs/ks value a chunk folded into o[0]; Q/K
                    staging, barriers, softmax and P.V kept: with D, splits the Q K^T side into staging and FMAs
  G  torch          torch SDPA (CUDA events) and its CUDA-graph replay, where torch+CUDA imports
  H  fma            the FMA peak of the run (wgraph/bench/fma.py): every time as a fraction of it on the causal
                    FLOPs of the two GEMMs (wgraph/bench/grids.flops)

Every kernel is timed as prefill_ab.py times (ab_timing.span_us): N calls back to back in one recording with
timestamps around every dispatch (first start to last end, and each kernel's time), the median of 3 recordings;
median of ROUNDS (3) rounds taken in turns. Prints per shape µs, TFLOP/s (causal FLOPs), fraction of the FMA peak
and each ablation's µs saved against A. Shapes: f32 16/16 D=128 at S 2048 and 4096, f16 32/8 D=128 at S 2048 (all
causal); any of HEADS ("16/16,32/8"), DIMS ("128"), LENGTHS ("2048,4096"), DTYPES ("f32,f16") set: every
combination of them. N (4) calls a recording. A is checked against torch where it runs and against float64 up to
S = 512. Writes $OUT/prefill_ablation.json (OUT default /tmp/prefill_ablation). SMALL=1: a lavapipe smoke run
(2/2 heads, D 64, S 96, f32, no torch; about 10 s) where every ablation compiles and runs; A is checked against
float64, the ablated kernels compute no attention and are not checked."""
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

import ab_registry
import ab_timing

SMALL = os.environ.get("SMALL") == "1"
OUT = Path(os.environ.get("OUT", "/tmp/prefill_ablation"))
OUT.mkdir(parents=True, exist_ok=True)
HEADS = ab_registry.env_list("HEADS", lambda v: tuple(int(x) for x in v.split("/"))) or \
    (((2, 2),) if SMALL else ((16, 16), (32, 8)))
DIMS = ab_registry.env_list("DIMS", int) or ((64,) if SMALL else (128,))
LENGTHS = ab_registry.env_list("LENGTHS", int) or ((96,) if SMALL else (2048, 4096))
DTYPES = ab_registry.env_list("DTYPES", str) or (("f32",) if SMALL else ("f32", "f16"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
N_CALLS = int(os.environ.get("N", "2" if SMALL else "4"))
# The brief's shapes: f32 16/16 at S 2048 and 4096, f16 32/8 at S 2048; the other combinations of the defaults are
# skipped (the run stays under ~3 minutes). Any of HEADS, LENGTHS, DTYPES set: every combination runs.
_DEFAULT = not any(os.environ.get(k) for k in ("HEADS", "LENGTHS", "DTYPES")) and not SMALL


def wanted(hq: int, hkv: int, S: int, dt: str) -> bool:
    if not _DEFAULT:
        return True
    return (dt, hq, hkv) == ("f32", 16, 16) or ((dt, hq, hkv) == ("f16", 32, 8) and S <= 2048)


EXP = Path("/tmp/prefill_ablation_shaders")
FLAT = ab_registry.copy_shaders(EXP)


# ---- the ablated kernels: text edits of the planned kernel's WGSL, each checked to apply exactly once ----

sub = ab_registry.sub


def cut(text: str, start: str, end: str, new: str) -> str:
    """`text` with the span from `start` up to (not including) `end` replaced by `new`; each marker must occur
    exactly once, `start` before `end`."""
    for marker in (start, end):
        if text.count(marker) != 1:
            raise SystemExit(f"ablation: {marker!r} occurs {text.count(marker)} times in the planned kernel's WGSL, "
                             f"expected 1; update benchmarks/prefill_ablation.py to the kernel")
    a, b = text.index(start), text.index(end)
    if a >= b:
        raise SystemExit(f"ablation: {start!r} is not before {end!r} in the planned kernel's WGSL")
    return text[:a] + new + text[b:]


MAIN_FILE = "attention_prefill_gemm.wgsl"
MAIN = (EXP / MAIN_FILE).read_text()
BODY = (EXP / "attention_gemm_body.wgsl").read_text()
TILES = (EXP / "attention_gemm_tiles.wgsl").read_text()
BODY_INCLUDE = "//!include attention_gemm_body.wgsl"
TILES_INCLUDE = "//!include attention_gemm_tiles.wgsl"

TILE_LOOP = "    for (var base: u32 = lo; base < hi; base += BLOCK_N) {\n"
FINAL = "    // The row's NaN, if any lane saw one, then 1 / l"
# Every ablation: `fold` (what C and F keep live instead of their math; a constant 0 elsewhere, folded away) goes
# into o[0]; a branch never taken (a dispatch has S >= 1) that the compiler cannot prove dead reads q, k and v,
# so a kernel that loads none of them (D, E) keeps its bindings (a driver or wgpu may drop an unused one).
PROLOGUE = "    var fold: f32 = 0.0;   // ablation: what C and F keep live\n" + TILE_LOOP
EPILOGUE = ("    o[0] += vec4<f32>(fold);\n"
            "    if (S == 0u) {\n"
            "        o[0] += vec4<f32>(q[0]) + vec4<f32>(kv_k4(0u)) + vec4<f32>(kv_v4(0u));\n"
            "    }\n" + FINAL)

QK_START = "        // 1. S = Q K^T over head-dim chunks"
PS_WRITE = "//!repeat j TN\n//!repeat a TM4\n        smem[ps_at(tx + ${j}u * CT"
QK_FMAS = "//!repeat c DC4\n            {\n"
QK_CHUNK_END = "            workgroupBarrier();             // the chunk is overwritten by the next one\n"
SOFTMAX = "        // 2. Online softmax of row `row`"
PV = "        // 3. O = O * corr + P V over chunks of VC keys.\n"
CORR_READ = "            let cr = corr_s[ty + ${i}u * RT];\n"
CORR_MUL = "            o[${i}u * DT4 + ${n}u] *= cr;\n"
PV_FMAS = "            if (tile_full) {\n"
PV_CHUNK_END = "            workgroupBarrier();             // vs is rewritten next, ps and vs by the next tile's qs and ks\n"

# B: p = the score of a key the row sees (0 else), written back to ps; l sums them so the scores stay live.
SOFTMAX_B = """        // 2. ablation B: p = the raw score, no transform, exp, butterflies or correction
//!repeat c KPL
        {
            let kk = part + ${c}u * LPR;
            let at = p_slot(kk, row);
            var x: f32 = 0.0;
            if (kk < n_keys && base + kk >= rr.x && base + kk < rr.y) {
                x = smem[ps_at(at.x, at.y)][at.z];
            }
            smem[ps_at(at.x, at.y)][at.z] = x;
            l += x;
        }
//!end
        workgroupBarrier();

"""
# D: scores from the row and key indices (values in [0, 1), new per tile so nothing is hoisted).
QK_D = """        // 1. ablation D: scores made from the row and key indices: no Q/K staging, loads or FMAs
        var sacc: array<f32, TM * TN>;
//!repeat i TM
//!repeat j TN
        sacc[${i}u * TN + ${j}u] = f32((ty + ${i}u * RT + base + tx + ${j}u * CT) & 15u) * 0.0625;
//!end
//!end
"""
# F: the softmax's two barriers (after the ps write and after the softmax) without its math.
SOFTMAX_F = ("        workgroupBarrier();   // ablation F: A's barrier after the ps write\n"
             "        workgroupBarrier();   // and after the softmax\n\n")
K_LOAD = "r.k[$n] = kv_k4(sl.k_at[$n] + c);"
V_LOAD = "r[$n] = kv_v4((kv_row(base + k0 + idx / ROW4) * params.num_kv_heads + g) * D4 + idx % ROW4);"


# What an ablation without a GEMM's FMAs keeps live instead (C, F, J): one staged value a chunk, into `fold`.
QK_FOLD = "            fold += smem[qs_at(ty, 0u)].x + smem[ks_at(tx, 0u)].x;   // ablation: no QK FMAs\n"
PV_FOLD = "            fold += smem[vs_at(0u, tx)].x;   // ablation: no P.V FMAs\n"


def ablation_sources() -> dict:
    """{tag: {file name: WGSL}} of every ablated kernel: its main file, body and (E) tiles."""
    body = sub(sub(BODY, TILE_LOOP, PROLOGUE), FINAL, EPILOGUE)
    no_corr = sub(sub(body, CORR_READ, ""), CORR_MUL, "")
    bodies = {
        "no_softmax": cut(no_corr, SOFTMAX, PV, SOFTMAX_B),
        "no_pv": cut(body, PV_FMAS, PV_CHUNK_END, PV_FOLD),
        "no_qk": cut(body, QK_START, PS_WRITE, QK_D),
        "no_kv_loads": body,
        "no_barriers": body.replace("workgroupBarrier();", ""),
        "no_qk_fmas": cut(body, QK_FMAS, QK_CHUNK_END, QK_FOLD),
        "staging": cut(cut(cut(no_corr, QK_FMAS, QK_CHUNK_END, QK_FOLD), PS_WRITE, PV, SOFTMAX_F),
                       PV_FMAS, PV_CHUNK_END, PV_FOLD),
    }
    # staged K/V are in their storage type (KV_T) until they are written to workgroup memory
    tiles_e = sub(sub(TILES, K_LOAD, "r.k[$n] = vec4<{{KV_T}}>({{KV_T}}(f32((sl.k_at[$n] + c) & 15u) * 0.0625));"
                                     "   // ablation E"),
                  V_LOAD, "r[$n] = vec4<{{KV_T}}>({{KV_T}}(f32((base + k0 + idx) & 15u) * 0.0625));   // ablation E")
    out = {}
    for tag, text in bodies.items():
        main = sub(MAIN, BODY_INCLUDE, f"//!include x_abl_pf_body_{tag}.wgsl")
        files = {f"x_abl_pf_{tag}.wgsl": main, f"x_abl_pf_body_{tag}.wgsl": text}
        if tag == "no_kv_loads":
            files[f"x_abl_pf_{tag}.wgsl"] = sub(main, TILES_INCLUDE, "//!include x_abl_pf_tiles_no_kv_loads.wgsl")
            files["x_abl_pf_tiles_no_kv_loads.wgsl"] = tiles_e
        out[tag] = files
    return out


TAGS = {"B": "no_softmax", "C": "no_pv", "D": "no_qk", "E": "no_kv_loads", "F": "staging", "I": "no_barriers",
        "J": "no_qk_fmas"}


def gemm_entry(D: int, dt: str) -> str:
    return f"prefill_gemm_d{64 if D <= 64 else 128}_{dt}"


def ablation_name(D: int, dt: str, tag: str) -> str:
    return f"x_abl_pf_d{64 if D <= 64 else 128}_{dt}_{tag}"


entries = []
for tag, files in ablation_sources().items():
    for name, text in files.items():
        (EXP / name).write_text(text)
    for cls in (64, 128):
        for dt in ("f32", "f16"):
            entries.append(ab_registry.toml_entry(ablation_name(cls, dt, tag),
                                                  {**FLAT[gemm_entry(cls, dt)], "file": f"x_abl_pf_{tag}.wgsl",
                                                   "tier": "exp", "experimental": True}))
(EXP / "registry" / "zz_prefill_ablation.toml").write_text("\n\n".join(entries) + "\n")

import wgraph.kernels.registry as R  # noqa: E402

R.SHADER_DIR = EXP
from wgraph.bench import torch_ref, warmup  # noqa: E402

TORCH = False if SMALL else torch_ref.probe()["available"]
if TORCH:
    warmup.init_torch_cuda()   # torch's CUDA context before the first wgraph device
import wgraph as wg  # noqa: E402
from wgraph.bench.fma import fma_peak  # noqa: E402
from wgraph.bench.grids import Shape, flops  # noqa: E402
from wgraph.ops import attention_loops  # noqa: E402

# lavapipe's loop cap: the ablated kernels' loops are the planned kernel's or fewer (its bound holds); the bounds
# are known by file name, so each copy gets the planned file's (a CPU device refuses a kernel without one)
for tag in TAGS.values():
    attention_loops.BOUNDS[f"x_abl_pf_{tag}.wgsl"] = attention_loops.BOUNDS[MAIN_FILE]

dev = wg.default_device()
print(dev.caps, flush=True)
RES = {"caps": str(dev.caps), "torch": TORCH, "n_calls": N_CALLS, "rounds": ROUNDS, "ablations": TAGS, "rows": [],
       "note": "only the planned kernel (A) computes attention and is checked against float64; B-F, I and J compute "
               "nothing meaningful and are not checked"}
RES["prepare"] = warmup.prepare(dev, TORCH)
WARM_S = 0.05 if SMALL else 0.15
RES["fma"] = fma_peak(dev, target_s=0.02 if SMALL else 0.05)
PEAKS = {"f32": max((r["tflops"] for r in RES["fma"] if r["status"] == "ok" and r["type"] == "f32"), default=None),
         "f16": max((r["tflops"] for r in RES["fma"] if r["status"] == "ok" and "f16" in r["type"]), default=None)}
RES["fma_peak_tflops"] = PEAKS
print(f"H FMA peak TFLOP/s: {PEAKS}", flush=True)


def save():
    (OUT / "prefill_ablation.json").write_text(json.dumps(RES, indent=1, default=str))


F64_MAX_S = 512   # the float64 reference's einsums take minutes at S = 4096, 16 heads


def reference(q, k, v):
    """float64 causal attention (S == L) of q [S, hq, D] over k, v [S, hkv, D]."""
    S, hq, d = q.shape
    hkv = k.shape[1]
    qg = q.astype(np.float64).reshape(S, hkv, hq // hkv, d)
    s = np.einsum("ikgd,jkd->kgij", qg, k.astype(np.float64)) / np.sqrt(d)
    s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=3, keepdims=True))
    p /= p.sum(axis=3, keepdims=True)
    return np.einsum("kgij,jkd->ikgd", p, v.astype(np.float64)).reshape(S, hq, d)


def torch_calls(s: Shape, arrays):
    """(eager call, its CUDA-graph replay) of torch SDPA on the shape (S == L: is_causal is wgraph's mask)."""
    import torch.nn.functional as F

    q, k, v = (torch_ref._to_torch(a, s.dtype, kind) for a, kind in zip(arrays, ("q", "kv", "kv")))
    kwargs = {"is_causal": True}
    if s.Hq != s.Hkv:
        try:
            F.scaled_dot_product_attention(q[:, :, :1], k[:, :, :1], v[:, :, :1], enable_gqa=True)
            kwargs["enable_gqa"] = True
        except TypeError:   # torch without enable_gqa: the kv heads repeated before timing (as run_sdpa does)
            k = k.repeat_interleave(s.Hq // s.Hkv, dim=1)
            v = v.repeat_interleave(s.Hq // s.Hkv, dim=1)

    def call():
        return F.scaled_dot_product_attention(q, k, v, **kwargs)

    return call, torch_ref.graph_replay(call)


def run_shape(hq: int, hkv: int, D: int, S: int, dt: str) -> dict:
    s = Shape("prefill", S, S, hq, hkv, D, dt)
    rng = np.random.default_rng(0)
    npdt = np.float16 if dt == "f16" else np.float32
    arrays = [rng.uniform(-1, 1, (S, h, D)).astype(npdt) for h in (hq, hkv, hkv)]
    tensors = [dev.tensor(a) for a in arrays]
    work = flops(s)
    row = {"shape": s.label(), "S": S, "Hq": hq, "Hkv": hkv, "D": D, "dtype": dt, "flops": work, "errors": {}}
    print(s.label(), flush=True)
    gemm = gemm_entry(D, dt)
    pick = wg.ops.attention_plan(*tensors, causal=True).variant
    row["planner_pick"] = pick
    row["planned"] = gemm
    a_var = None if pick == gemm else gemm   # the planner's own call where it picks the GEMM kernel
    row["a_forced"] = a_var is not None
    print(f"  planner: {pick}" + (f" -> forced {gemm}" if a_var else " (asserted the GEMM kernel)"), flush=True)
    variants = {"A planned": a_var, **{f"{k} {t}": ablation_name(D, dt, t) for k, t in TAGS.items()}}
    outs, calls = {}, {}
    for label, var in variants.items():
        try:
            out = wg.ops.attention(*tensors, causal=True, variant=var)
            outs[label] = out
            calls[label] = (lambda var=var, out=out: wg.ops.attention(*tensors, causal=True, variant=var, out=out))
        except Exception as e:  # noqa: BLE001 - one failing ablation must not end the run
            row["errors"][label] = f"{type(e).__name__}: {str(e)[:300]}"
            print(f"  {label} failed: {row['errors'][label]}", flush=True)
    if "A planned" not in calls:
        raise SystemExit(f"the planned kernel {gemm} does not run at {s.label()}: {row['errors']}")
    if S <= F64_MAX_S:   # float64 on the host: short sequences only (a GPU run compares with torch too)
        diff = float(np.max(np.abs(outs["A planned"].numpy().astype(np.float64) - reference(*arrays))))
        row["A_max_abs_diff_f64"] = diff
        print(f"  A planned against float64: max |diff| {diff:.2e}", flush=True)
        if not diff < (2e-2 if dt == "f16" else 1e-4):
            raise SystemExit(f"{gemm} at {s.label()} is {diff:.3g} from the float64 reference")
    torch_fns = None
    if TORCH:
        try:
            eager, graph = torch_calls(s, arrays)
            import torch

            ref = eager()[0].permute(1, 0, 2).float().cpu().numpy()
            row["A_max_abs_diff_torch"] = float(np.max(np.abs(outs["A planned"].numpy().astype(np.float32) - ref)))
            print(f"  A planned against torch: max |diff| {row['A_max_abs_diff_torch']:.2e}", flush=True)
            torch.cuda.synchronize()
            torch_fns = {"G torch": eager, "G torch graph": graph}
        except Exception as e:  # noqa: BLE001 - torch failing must not end the run
            row["errors"]["G torch"] = f"{type(e).__name__}: {str(e)[:300]}"
            print(f"  torch failed: {row['errors']['G torch']}", flush=True)
    dev.sync()
    rounds = {label: [] for label in calls}
    splits = {label: [] for label in calls}
    t_rounds = {label: [] for label in (torch_fns or {})}
    for _ in range(ROUNDS):   # rounds in turns: each round times every kernel once
        for label, call in list(calls.items()):
            try:
                us, split = ab_timing.span_us(dev, call, N_CALLS, WARM_S)
                rounds[label].append(us)
                splits[label].append(split)
            except Exception as e:  # noqa: BLE001
                row["errors"][label] = f"{type(e).__name__}: {str(e)[:300]}"
                print(f"  {label} failed: {row['errors'][label]}", flush=True)
                del calls[label], rounds[label]
        for label, fn in (torch_fns or {}).items():
            t_rounds[label].append(torch_ref.cuda_time_ms(fn, N_CALLS) * 1e3)
    peak = PEAKS.get(dt)
    row["cases"] = {}
    for label, us_list in {**rounds, **t_rounds}.items():
        us = statistics.median(us_list)
        c = {"us": us, "rounds_us": us_list, "tflops": work / us / 1e6}
        c["of_fma"] = c["tflops"] / peak if peak else None
        if splits.get(label):
            c["split"] = splits[label][-1]
        row["cases"][label] = c
    a_us = row["cases"]["A planned"]["us"]
    print(f"  {'':22}{'us':>10}{'TFLOP/s':>9}{'of FMA':>8}{'saved vs A':>12}{'of A':>7}", flush=True)
    for label, c in row["cases"].items():
        c["saved_vs_a_us"] = a_us - c["us"]
        fma = f"{c['of_fma']:8.3f}" if c["of_fma"] is not None else f"{'-':>8}"
        print(f"  {label:22}{c['us']:10.1f}{c['tflops']:9.2f}{fma}{c['saved_vs_a_us']:12.1f}"
              f"{c['saved_vs_a_us'] / a_us:7.2f}", flush=True)
    return row


t_start = time.perf_counter()
for dt in DTYPES:
    for hq, hkv in HEADS:
        for D in DIMS:
            for S in LENGTHS:
                if wanted(hq, hkv, S, dt):
                    RES["rows"].append(run_shape(hq, hkv, D, S, dt))
                    save()
RES["elapsed_s"] = time.perf_counter() - t_start
save()
print(f"\n{RES['note']}; 'saved vs A' is A's us minus the row's (the work the ablation removed, where the parts do "
      f"not overlap).\ndone in {RES['elapsed_s']:.0f} s; wrote {OUT / 'prefill_ablation.json'}", flush=True)
