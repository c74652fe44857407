"""A/B of the prefill GEMM's K splits and K slices on one GPU in one run (run from the project root): the
128-512-row calls through the 1B model's smaller matrices (the issue-22 rows below 50% of the FMA peak), each
GEMM configuration of the registry at every K split it allows (`--variants all` measures only its own split and
unsplit), beside the planned call, and the same tiles with 32-k slices (experimental registry entries, never
planned: a forced `variant=` reaches them). The f32 FMA peak of the same run is the yardstick.

Writes $OUT/gemm_split_ab.json (every row: wgraph.bench.gemm's fields, each checked against float64 on a sample)
and prints, per shape, the configurations by TFLOP/s; then, per split rule (workgroups the split aims at), the
fraction of the FMA peak each rule would reach over the shapes: the numbers for gemm.toml's fill_workgroups.
Knobs: ROWS="128,256,512", DTYPES="f16,f32", SPLITS="1,2,3,4,6,8,12,16", MATRICES="2048x2048,512x2048" (out x
in), MIN_SPLIT_K (default: each configuration's min_split_k; a split leaving slices shorter than it is not
timed), BUDGET_S (default 240), SMALL=1 (a lavapipe-sized smoke run: 40 rows of a [64, 256] matrix)."""
import json
import os
import sys
import time
from pathlib import Path

import ab_registry

SMALL = os.environ.get("SMALL") == "1"
OUT = Path(os.environ.get("OUT", "/tmp/gemm_split_ab"))
OUT.mkdir(parents=True, exist_ok=True)
BUDGET_S = float(os.environ.get("BUDGET_S", "240"))
EXP = Path("/tmp/gemm_split_ab_shaders")
ROWS = ab_registry.env_list("ROWS", int) or ((40,) if SMALL else (128, 256, 512))
DTYPES = ab_registry.env_list("DTYPES", str) or ("f16", "f32")
SPLITS = ab_registry.env_list("SPLITS", int) or (1, 2, 3, 4, 6, 8, 12, 16)
MATRICES = (ab_registry.env_list("MATRICES", lambda v: tuple(int(d) for d in v.split("x")))
            or (((64, 256),) if SMALL else ((2048, 2048), (512, 2048), (8192, 2048), (2048, 8192))))
MIN_SPLIT_K = int(os.environ["MIN_SPLIT_K"]) if os.environ.get("MIN_SPLIT_K") else None
TILES = ("128x128", "64x128")  # the configurations whose 32-k slice twins are added
REL_TOL = 1e-4


def write_registry() -> None:
    """The shaders' copy with a 32-k slice twin of each TILES configuration (named ..._k32_...)."""
    entries = ab_registry.copy_shaders(EXP)
    out = []
    for tile in TILES:
        for wdt in ("f32", "f16"):
            name = f"linear_gemm_{tile}_{wdt}w"
            e = dict(entries[name])
            e["defines"] = {**e["defines"], "TILE_K": "32", "K_UNROLL": "16"}
            e.pop("fallback", None)
            e["min_tiles"] = 1 << 30  # never planned
            out.append(ab_registry.toml_entry(f"linear_gemm_{tile}_k32_{wdt}w", e))
    (EXP / "registry" / "zz_gemm_split_ab.toml").write_text("\n".join(out))


write_registry()
import wgraph.kernels.registry as R  # noqa: E402

R.SHADER_DIR = EXP
import wgraph as wg  # noqa: E402
from wgraph.bench import fma, gemm, report  # noqa: E402
from wgraph.kernels.registry import kernel, kernels_for  # noqa: E402
from wgraph.ops.dense import gemm_tiles  # noqa: E402


def configs(s, variants):
    """The plan, then every GEMM configuration of the weight dtype at every split of SPLITS it accepts."""
    out = [(None, None)]
    for kv in kernels_for("linear"):
        if (kv.facts.get("form") != "gemm" or kv.facts.get("weight_dtype") != s.weight_dtype
                or s.in_features % kv.limits["k_multiple"] or s.rows > kv.facts.get("max_rows", s.rows)):
            continue
        out += [(kv.name, n) for n in SPLITS if n <= kv.facts["max_splits"]
                and s.in_features // n >= min(MIN_SPLIT_K or kv.facts["min_split_k"], s.in_features)]
    return out


gemm.configs = configs  # bench_gemm's list of (variant, split) to time
dev = wg.default_device()
t0 = time.perf_counter()
peak_rows = fma.fma_peak(dev, target_s=0.05 if SMALL else 0.2)
peak = fma.peak_tflops({"fma": {"rows": peak_rows}})
print(f"f32 FMA peak: {peak:.4g} TFLOP/s", flush=True)
shapes = [gemm.GemmShape(m, n, k, dt) for n, k in MATRICES for dt in DTYPES for m in ROWS]
rows = gemm.bench_gemm(dev, shapes, peak_tflops=peak, variants="all", use_torch=False, budget_s=BUDGET_S,
                       target_s=0.03 if SMALL else 0.08, progress=lambda m: print(m, flush=True))
wrong = [r for r in rows if r["status"] == "ok" and not r.get("max_rel_err_vs_float64", 1.0) <= REL_TOL]
for r in wrong:
    r.update(status="wrong", note=f"max rel err vs float64 {r['max_rel_err_vs_float64']} > {REL_TOL}")
RES = {"meta": report.machine_meta(dev, ["benchmarks/gemm_split_ab.py"]), "fma": peak_rows, "peak_tflops": peak,
       "splits": SPLITS, "rows": rows, "elapsed_s": time.perf_counter() - t0}
(OUT / "gemm_split_ab.json").write_text(json.dumps(RES, indent=1, default=str))
print(gemm.table(rows, peak))

# per workgroup target: each shape's best configuration among the splits that make about that many workgroups
print("\nbest configuration per shape with the split nearest each workgroup target (fraction of the FMA peak):")
ok = [r for r in rows if r["status"] == "ok" and not r.get("planned")]
for target in (128, 264, 396, 528):
    cells = []
    for s in shapes:
        same = [r for r in ok if (r["rows"], r["out_features"], r["in_features"], r["weight_dtype"])
                == (s.rows, s.out_features, s.in_features, s.weight_dtype)]
        by_variant = {}
        for r in same:
            gap = abs(gemm_tiles(kernel(r["variant"]), s.rows, s.out_features) * r["splits"] - target)
            if r["variant"] not in by_variant or gap < by_variant[r["variant"]][0]:
                by_variant[r["variant"]] = (gap, r)
        if by_variant:
            best = max((r for _, r in by_variant.values()), key=lambda r: r["tflops"])
            cells.append(f"{s.rows}x[{s.out_features},{s.in_features}]{s.weight_dtype} "
                         f"{best['variant'].replace('linear_gemm_', '')}/{best['splits']} "
                         f"{best['fraction_of_fma_peak']:.2f}")
    print(f"  ~{target} workgroups: " + "; ".join(cells))
print(f"elapsed {time.perf_counter() - t0:.0f} s")
sys.exit(1 if wrong else 0)
