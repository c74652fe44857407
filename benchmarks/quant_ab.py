"""A/B of the quantized GEMV (`linear` on a QuantizedWeight, shaders/quant_gemv.wgsl) on one GPU in one run (run
from the project root): each format (Q4_0, Q4_K, Q8_0, Q4_1) on the Llama-3.2-1B decode calls (norm + lm_head,
norm + gate+up + swiglu, down + residual, norm + qkv, o_proj + residual), one row of x, under the planned
variant, the registry's tuning candidates (the integer-dot readers among them), this file's candidates (other
shapes) and the COMPUTE-ONLY BOUND: the same kernel with W's words made in registers from their index instead of
loaded (quant_words_registers.wgsl), so its time is the kernel's arithmetic, x loads and sums without W's bytes:
a real kernel within ~15% of its bound is bound by its instructions, not by memory. The copy kernel's bandwidth
in the same run.

Candidates are experimental registry entries (a copy of wgraph/shaders/ with one more TOML file), forced
through `linear(variant=)`: never planned. Writes $OUT/quant_ab.json (every row) and prints, per shape, each
configuration's GPU µs and fraction of copy (best first) with the bound beside it, then, per planning class
(the quant.toml entry that plans those shapes now), the configuration with the least total time.
Env: SMALL=1 a smoke run (lavapipe-sized shapes, two formats); TYPES=Q4_0,Q4_K,... the formats; BUDGET_S
(default 120; the shape running then finishes): past it the shapes left (the smallest: the big ones go first)
run the planned variant and its bound only; TARGET_S (default 0.1): seconds of calls per timing; ROUNDS (default
2): a shape's configurations timed that many times in turns, the least kept (a single timing of a small matrix can
read several times too long); SKIP: registry
variants and candidates (names without the format) left out, with their twins; CALLS: only these 1B calls
(names as wgraph/bench/quant.py's LLAMA_1B_CALLS, comma-separated); TWINS: the variants whose compute-only
twin is timed (names without the format; default: the list below). ROWS=2..8: the 1B matrices' rows
of x in prefill chunks and batched decode (gate_proj, down_proj) with that many rows instead, the candidates
then on quant_gemv_r8's form (fewer weight rows a slot, more steps in flight: the 8-row Q4_K GEMV holds 217
registers a thread, h200-pipeline-stats.log)."""
import json
import os
import sys
import time
import tomllib
from pathlib import Path

import ab_registry

SMALL = os.environ.get("SMALL") == "1"
OUT = Path(os.environ.get("OUT", "/tmp/quant_ab"))
OUT.mkdir(parents=True, exist_ok=True)
BUDGET_S = float(os.environ.get("BUDGET_S", "120"))
SKIP = set(filter(None, os.environ.get("SKIP", "").split(",")))
TARGET_S = float(os.environ.get("TARGET_S", "0.03" if SMALL else "0.1"))
TYPES = os.environ.get("TYPES", "Q4_0,Q4_K" if SMALL else "Q4_0,Q4_K,Q8_0,Q4_1").split(",")
ROWS = int(os.environ.get("ROWS", "1"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
ROWS_CLASS = 1 if ROWS == 1 else 8   # the max_rows of the registry entries the A/B compares
EXP = Path("/tmp/quant_ab_shaders")
REGISTERS = "quant_words_registers.wgsl"

# This file's candidates: (name, limits, per-format table as a registry entry's per_row, formats or None for the
# base's), on quant_gemv_r1_ft4's form
WHOLE = {f: {"defines": {"QTYPE_LANES": f"quant_lanes_{f}_whole.wgsl"}} for f in ("q4_0", "q4_1")}
CANDIDATES = [
    ("ab_l32_f8_u1", {"lanes": 32, "features_per_lane": 8, "unroll": 1}, {}, None),
    ("ab_l64_f4_u1", {"lanes": 64, "features_per_lane": 4, "unroll": 1}, {"q8_0": {"limits": {"unroll": 2}}}, None),
    # the wide entry's shape with one step in flight (fewer registers: the fused norm's x and norm_w loads of two
    # steps held the wide Q4_1 kernel at 80 registers once HAS_NORM became a compiled-in constant)
    ("ab_l32_f4_u1", {"lanes": 32, "features_per_lane": 4, "unroll": 1}, {"q8_0": {"limits": {"unroll": 2}}}, None),
    # whole Q4_0 / Q4_1 blocks a lane (quant_gemv_r1's shape for them) with every load of a 2048-wide row in flight
    # at once: both steps' blocks loaded before the first sum and x staged once (the planned one loads a step's
    # blocks after the step before is summed: two memory round trips a row); or 64 lanes, one step a row. 64 lanes x
    # 2 rows (ab_whole_l64_f2 in h100-quant-whole-*-ab-1206.log) is quant_gemv_r1_long's shape since.
    ("ab_whole_s2_pf", {"lanes": 32, "features_per_lane": 2, "unroll": 1, "lanes_per_block": 1, "stage_steps": 2,
                        "prefetch": 1}, WHOLE, list(WHOLE)),
    ("ab_whole_l64_f1", {"lanes": 64, "features_per_lane": 1, "unroll": 1, "lanes_per_block": 1}, WHOLE, list(WHOLE)),
    # the long rows (down_proj, 8192 k: 4 steps at 64 lanes)
    ("ab_whole_l128_f1", {"lanes": 128, "features_per_lane": 1, "unroll": 1, "lanes_per_block": 1}, WHOLE,
     list(WHOLE)),
    ("ab_whole_l64_f2_s2", {"lanes": 64, "features_per_lane": 2, "unroll": 1, "lanes_per_block": 1, "stage_steps": 2,
                            "prefetch": 1}, WHOLE, list(WHOLE)),
    ("ab_whole_l64_f4", {"lanes": 64, "features_per_lane": 4, "unroll": 1, "lanes_per_block": 1}, WHOLE,
     list(WHOLE)),
]
# registry variants whose compute-only twin is timed (besides the planned one's)
TWINS = ["quant_gemv_r1_wide", "quant_gemv_r1", "quant_gemv_r1_wide_i8", "quant_gemv_r1_wide_k_i8", "quant_gemv_r1_ft4",
         "ab_l32_f8_u1"]
if SMALL:
    CANDIDATES = CANDIDATES[:1]
    TWINS = ["quant_gemv_r1_wide", "quant_gemv_r1", "quant_gemv_r1_wide_i8", "ab_l32_f8_u1"]
BASE = "quant_gemv_r1_ft4"
if ROWS > 1:   # candidates on the multi-row entry's form
    BASE = "quant_gemv_r8"
    CANDIDATES = [("ab_r8_f1", {"lanes": 32, "features_per_lane": 1, "unroll": 1}, {}, None),
                  ("ab_r8_f1_u2", {"lanes": 32, "features_per_lane": 1, "unroll": 2}, {}, None),
                  ("ab_r8_l64_f1", {"lanes": 64, "features_per_lane": 1, "unroll": 1}, {}, None),
                  ("ab_r8_f2_u2", {"lanes": 32, "features_per_lane": 2, "unroll": 2}, {}, None)]
    TWINS = ["quant_gemv_r8", "ab_r8_f1"]
if os.environ.get("TWINS"):
    TWINS = os.environ["TWINS"].split(",")


def write_registry() -> None:
    """A copy of the shaders with zz_quant_ab.toml: the candidates and every twin (compute_only = true)."""
    ab_registry.copy_shaders(EXP)
    quant = tomllib.loads((EXP / "registry" / "quant.toml").read_text())["variants"]
    one_row = {n: e for n, e in quant.items() if e["op"] == "linear_q" and e["limits"]["max_rows"] == ROWS_CLASS
               and "subgroup" in e.get("features", [])}
    entries = {}
    base = quant[BASE]
    for name, limits, per_row, formats in CANDIDATES:
        entries[name] = {**{k: v for k, v in base.items() if k != "per_row"},
                         "limits": {"max_rows": ROWS_CLASS, **limits}, "candidate": True}
        if per_row:
            entries[name]["per_row"] = per_row
        if formats:
            entries[name]["rows"] = formats
    for name, e in {**one_row, **entries}.items():
        twin = {**e, "defines": {**e.get("defines", {}), "QUANT_WORDS": REGISTERS}, "candidate": True, "min_n": 0,
                "compute_only": True}
        entries[f"{name}_regs"] = twin
    text = "\n".join(ab_registry.toml_entry(n, e) for n, e in entries.items())
    (EXP / "registry" / "zz_quant_ab.toml").write_text(text)


write_registry()
import wgraph.kernels.registry as R  # noqa: E402

R.SHADER_DIR = EXP
import wgraph as wg  # noqa: E402
from wgraph.bench import gemv, quant, report  # noqa: E402
from wgraph.kernels.registry import kernel, kernels_for  # noqa: E402

dev = wg.default_device()
if not dev.caps.has_subgroups:
    sys.exit(f"{dev.caps.adapter_name} has no subgroups: the candidates need them")
t0 = time.perf_counter()
copy = gemv.copy_bandwidth(dev, gemv.copy_bytes(dev.caps, "quick" if SMALL else "full"))
print(f"copy kernel: {copy['gbps']:.1f} GB/s", flush=True)
calls = quant.SMALL_CALLS if SMALL else (quant.LLAMA_1B_CALLS if ROWS == 1 else quant.LLAMA_1B_MULTI_ROW)
if os.environ.get("CALLS"):  # only these calls (their names in wgraph/bench/quant.py)
    calls = {name: calls[name] for name in os.environ["CALLS"].split(",")}
# the big shapes first: they are the target; the budget cuts the small ones short
order = sorted(calls.items(), key=lambda kv: -kv[1][0] * kv[1][1])
shapes = [quant.QuantGemvShape(t, ROWS, n, k, name, *opts) for name, (n, k, *opts) in order for t in TYPES]
RES = {"meta": report.machine_meta(dev, ["benchmarks/quant_ab.py"]), "copy": copy, "budget_s": BUDGET_S, "rounds": ROUNDS,
       "candidates": CANDIDATES, "twins": TWINS, "rows": []}


def variants_for(s) -> list[str]:
    """The planned GEMV and its bound; then the format's one-row subgroup candidates and the chosen twins."""
    planned = quant._plan(dev, s).variant
    t = s.ggml_type.lower()
    twin = lambda name: f"{name.removesuffix('_' + t)}_regs_{t}"  # noqa: E731
    out = [planned, twin(planned)]
    if time.perf_counter() - t0 > BUDGET_S:
        RES.setdefault("planned_only_past_budget", []).append(f"{s.ggml_type} {s.matrix}")
        return out
    for kv in kernels_for("linear_q"):
        if (kv.facts["ggml_type"] == s.ggml_type and kv.limits["max_rows"] == ROWS_CLASS and "subgroup" in kv.features
                and not kv.facts.get("compute_only") and kv.name != planned
                and kv.name.removesuffix("_" + t) not in SKIP):
            out.append(kv.name)
    known = {kv.name for kv in kernels_for("linear_q")}
    out += [twin(f"{n}_{t}") for n in TWINS
            if n not in SKIP and twin(f"{n}_{t}") in known and twin(f"{n}_{t}") not in out]
    return out


def timed_in_turns(s, names: list[str]) -> list[dict]:
    """Each variant's row with the least GPU time of ROUNDS rounds in turns (every other round in reverse order),
    its times in `gpu_us_rounds`: one timing of a small matrix was seen at up to 4x another of the same kernel in
    the same run (h200-quant-i8stage-ab.log against h200-quant-i8stage-bench.log)."""
    kept: dict = {}
    for r in range(ROUNDS):
        for row in quant.bench_quant_gemv(dev, [s], copy_gbps=copy["gbps"], all_variants=False, use_torch=False,
                                          target_s=TARGET_S, progress=lambda m: print(m, flush=True),
                                          variants=names if r % 2 == 0 else names[::-1]):
            key = row.get("variant", "")  # a row without one: the shape's allocation failed
            times = kept.get(key, {}).get("gpu_us_rounds", []) + ([row["gpu_us"]] if "gpu_us" in row else [])
            if key not in kept or ("gpu_us" in row and row["gpu_us"] < kept[key].get("gpu_us", float("inf"))):
                kept[key] = row
            kept[key]["gpu_us_rounds"] = times
    return list(kept.values())


for s in shapes:
    rows = timed_in_turns(s, variants_for(s))
    for r in rows:
        r["planned_variant"] = quant._plan(dev, s).variant
    RES["rows"] += rows
    (OUT / "quant_ab.json").write_text(json.dumps(RES, indent=1, default=str))

# ---- per shape: configurations best first, each beside its compute-only bound ----
print(f"\n== per shape: GPU us, fraction of copy ({copy['gbps']:.0f} GB/s) on the bytes read; bound = the same kernel "
      f"without W's loads (us; real / bound) ==")
by_shape: dict = {}
for r in RES["rows"]:
    if r["status"] == "ok":
        by_shape.setdefault((r["ggml_type"], r["matrix"], r["out_features"], r["in_features"]), []).append(r)
for key, rs in by_shape.items():
    bound = {r["variant"].replace("_regs", ""): r["gpu_us"] for r in rs if r["compute_only"]}
    print(f"{key[0]} {key[1]} [{key[2]}, {key[3]}] ({rs[0]['bytes'] / 1e6:.1f} MB)")
    for r in sorted((r for r in rs if not r["compute_only"]), key=lambda r: r["gpu_us"]):
        b = bound.get(r["variant"])
        tail = f"  bound {b:8.2f} us ({r['gpu_us'] / b:.2f}x)" if b else ""
        print(f"  {r['variant'] + ('*' if r['planned'] else ''):34} {r['gpu_us']:8.2f} us {r['fraction_of_copy']:6.3f} "
              f"of copy  err {r['max_rel_err_vs_float64']:.1e}{tail}")
        r["compute_only_us"] = b

# ---- per planning class: the configuration with the least total time over the class's shapes ----
print("\n== per planning class (the quant.toml entry that plans them now): total GPU us over its shapes ==")
by_class: dict = {}
for r in RES["rows"]:
    if r["status"] == "ok" and not r["compute_only"]:
        shape = (r["matrix"], r["out_features"], r["in_features"])
        by_class.setdefault(r["planned_variant"], {}).setdefault(r["variant"], {})[shape] = r["gpu_us"]
summary = {}
for cls, per_config in sorted(by_class.items()):
    if cls not in per_config:  # the planned variant failed on every shape of its class: the rows say why
        continue
    shapes_of = set(per_config[cls])
    totals = {c: sum(v[k] for k in shapes_of) for c, v in per_config.items() if shapes_of <= set(v)}
    best = min(totals, key=totals.get)
    # the best that keeps x in f32 (the integer-dot readers round it: a change of accuracy, not only of speed)
    exact = min((c for c in totals if not kernel(c).facts.get("x_int8")), key=totals.get)
    print(f"{cls:26}: {len(shapes_of)} shape(s); planned {totals[cls]:9.1f} us; best {best} {totals[best]:9.1f} us")
    for c in dict.fromkeys([best, exact]):
        k = kernel(c)
        print(f"{'':28}{c}{' (x rounded to int8)' if k.facts.get('x_int8') else ''}: {totals[c]:9.1f} us -> lanes = "
              f"{k.limits['lanes']}, features_per_lane = {k.limits['features_per_lane']}, unroll = {k.limits['unroll']}, "
              f"workgroup_size = [{k.threads}]")
    summary[cls] = {"shapes": sorted(map(list, shapes_of)), "totals_us": totals, "best": best, "best_f32_x": exact}
RES["summary"] = summary
RES["elapsed_s"] = time.perf_counter() - t0
(OUT / "quant_ab.json").write_text(json.dumps(RES, indent=1, default=str))
print(f"\nwrote {OUT / 'quant_ab.json'} in {RES['elapsed_s']:.0f} s")
