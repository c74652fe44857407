"""A/B of GEMV configurations on one GPU in one run (run from the project root): every shape of the gemv bench's
full grid (Llama-3.2-1B and Llama-3.1-8B matrices, f16 and f32, 1 and 8 rows, and the decode step's fused
forms) under the planned variant and under every candidate configuration that can take it, the candidates
taking turns in rounds on each shape; the copy kernel's bandwidth and the dispatch floor in the same run.

Candidates are experimental registry entries (a copy of wgraph/shaders/ with one more TOML file, the same
gemv.wgsl), forced through `linear(variant=)`. Writes $OUT/gemv_ab.json (every row) and prints each shape's
configurations by GPU time, then, for each planning class of registry/gemv.toml, the configuration with the
least total time over the class's shapes beside the entry's own: the numbers to write into that entry.
SMALL=1: a smoke run (lavapipe-sized shapes, two candidates); R1, R8 and ROWS (below) pick candidates and shapes. BUDGET_S (default 300): past it, the shapes left
run the planned variant only (marked in the JSON), so the run stays within a device session's limits."""
import json
import os
import shutil
import sys
import time
from pathlib import Path

SMALL = os.environ.get("SMALL") == "1"
OUT = Path(os.environ.get("OUT", "/tmp/gemv_ab"))
OUT.mkdir(parents=True, exist_ok=True)
BUDGET_S = float(os.environ.get("BUDGET_S", "300"))
EXP = Path("/tmp/gemv_ab_shaders")

# (lanes, features_per_lane, unroll, threads) per row count
R1 = [(32, 1, 4, 256), (64, 1, 4, 256), (128, 1, 4, 256), (256, 1, 2, 256), (32, 2, 4, 256), (64, 2, 4, 256),
      (32, 1, 8, 256)]
R8 = [(32, 1, 2, 256), (32, 2, 2, 256), (64, 2, 2, 256), (32, 4, 1, 256), (32, 4, 2, 256)]
if SMALL:
    R1, R8 = R1[:1] + R1[4:5], R8[:2]
# R1 / R8="lanes,ft,unroll,threads;...": other 1-row / 8-row candidates; ROWS=1 or 8: only those shapes
if os.environ.get("R1"):
    R1 = [tuple(int(v) for v in c.split(",")) for c in os.environ["R1"].split(";")]
if os.environ.get("R8"):
    R8 = [tuple(int(v) for v in c.split(",")) for c in os.environ["R8"].split(";")]
ROWS = int(os.environ["ROWS"]) if os.environ.get("ROWS") else None


def config_name(rows: int, c) -> str:
    lanes, ft, unroll, threads = c
    return f"ab_r{rows}_l{lanes}_f{ft}_u{unroll}_t{threads}"


def write_registry():
    shutil.rmtree(EXP, ignore_errors=True)
    shutil.copytree("wgraph/shaders", EXP)
    entries = []
    for rows, configs in ((1, R1), (8, R8)):
        for c in configs:
            lanes, ft, unroll, threads = c
            entries.append(f'[variants.{config_name(rows, c)}]\nmatrix = "gemv_weights"\nop = "linear"\n'
                           f'file = "gemv.wgsl"\nentry = "main"\nworkgroup_size = [{threads}]\nfeatures = ["subgroup"]\n'
                           f'defines = {{ GEMV_ENTRY = "gemv_entry_subgroup.wgsl" }}\n'
                           f'limits = {{ max_rows = {rows}, lanes = {lanes}, features_per_lane = {ft}, unroll = {unroll} }}\n'
                           f'form = "gemv"\nweight_dtype = "{{dt}}"\nmin_k = 0\nmin_n = 0\n')
    # read after gemv.toml, whose last subgroup entries take any shape: the planner never reaches these
    (EXP / "registry" / "zz_gemv_ab.toml").write_text("\n".join(entries))


def planned_variant(s) -> str:
    """The registry/gemv.toml entry that plans shape `s` now (its class)."""
    from wgraph.ops.dense import plan_linear
    return plan_linear(s.rows, s.out_features, s.in_features, s.weight_dtype, dev.caps, swiglu=s.swiglu).variant


write_registry()
import wgraph.kernels.registry as R  # noqa: E402

R.SHADER_DIR = EXP
import wgraph as wg  # noqa: E402
from wgraph.bench import gemv, report, torch_ref  # noqa: E402
from wgraph.kernels.registry import kernel  # noqa: E402

dev = wg.default_device()
if not dev.caps.has_subgroups:
    sys.exit(f"{dev.caps.adapter_name} has no subgroups: the candidates need them")
t0 = time.perf_counter()
torch_info = torch_ref.probe()
copy = gemv.copy_bandwidth(dev, gemv.COPY_BYTES["quick" if SMALL else "full"])
print(f"copy kernel: {copy['gbps']:.1f} GB/s", flush=True)
floor = gemv.dispatch_floor(dev)
print(f"dispatch floor: {floor}", flush=True)
shapes = [s for s in gemv.GEMV_GRIDS["tiny" if SMALL else "full"] if ROWS is None or s.rows == ROWS]
RES = {"meta": report.machine_meta(dev, ["benchmarks/gemv_ab.py"]), "copy": copy, "dispatch_floor": floor,
       "torch": torch_info, "candidates": {"r1": R1, "r8": R8}, "rows": []}
RES["budget_s"] = BUDGET_S
for s in shapes:
    configs = R1 if s.rows == 1 else R8
    variants = [None] + [f"{config_name(1 if s.rows == 1 else 8, c)}_{s.weight_dtype}" for c in configs]
    if time.perf_counter() - t0 > BUDGET_S:
        variants = [None]
        RES.setdefault("planned_only_past_budget", []).append(s.label())
    rows = gemv.bench_gemv(dev, [s], copy_gbps=copy["gbps"], use_torch=True,
                           torch_available=bool(torch_info.get("available")), variants=variants,
                           target_us=300.0 if SMALL else 2000.0, progress=lambda m: print(m, flush=True))
    for r in rows:
        r["planned_variant"] = planned_variant(s)
    RES["rows"] += rows
    (OUT / "gemv_ab.json").write_text(json.dumps(RES, indent=1, default=str))

# ---- per class: the candidate with the least total time over the shapes the class plans ----
print("\n== per planning class (the registry/gemv.toml entry that plans them now): total GPU us over its shapes ==")
by_class = {}
for r in RES["rows"]:
    if r["status"] == "ok":
        key = (r["planned_variant"].rsplit("_", 1)[0], r["weight_dtype"], "swiglu" if r["swiglu"] else "")
        shape = (r["rows"], r["out_features"], r["in_features"], r["norm"], r["residual"])
        by_class.setdefault(key, {}).setdefault(r["config"], {})[shape] = r["gpu_us"]
summary = {}
for (cls, dt, sw), per_config in sorted(by_class.items()):
    shapes_of = set(per_config["planned"])
    totals = {c: sum(v[k] for k in shapes_of) for c, v in per_config.items() if shapes_of <= set(v)}
    best = min(totals, key=totals.get)
    k = kernel(best) if best != "planned" else None
    print(f"{cls:16} {dt} {sw:6}: {len(shapes_of):2d} shapes; planned {totals['planned']:9.1f} us; best {best} "
          f"{totals[best]:9.1f} us" + (f" -> lanes = {k.limits['lanes']}, features_per_lane = "
                                       f"{k.limits['features_per_lane']}, unroll = {k.limits['unroll']}, "
                                       f"workgroup_size = [{k.threads}]" if k else ""))
    summary[f"{cls} {dt} {sw}".strip()] = {"shapes": sorted(map(list, shapes_of)), "totals_us": totals, "best": best}
RES["summary"] = summary
RES["elapsed_s"] = time.perf_counter() - t0
(OUT / "gemv_ab.json").write_text(json.dumps(RES, indent=1, default=str))
print(f"\nwrote {OUT / 'gemv_ab.json'} in {RES['elapsed_s']:.0f} s")
