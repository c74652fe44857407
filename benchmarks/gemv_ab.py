"""A/B of GEMV configurations on one GPU in one run (run from the project root): every shape of the gemv bench's
full grid (Llama-3.2-1B and Llama-3.1-8B matrices, f16 and f32, 1 and 8 rows, and the decode step's fused
forms) under the planned variant and under every candidate configuration that can take it, the candidates
taking turns in rounds on each shape; the copy kernel's bandwidth and the dispatch floor in the same run.

Candidates are experimental registry entries (a copy of wgraph/shaders/ with one more TOML file, the same
gemv.wgsl), forced through `linear(variant=)`. Writes $OUT/gemv_ab.json (every row) and prints each shape's
configurations by GPU time (best first), then, for each planning class of registry/gemv.toml, the
configuration with the least total time over the class's shapes beside the entry's own: the numbers to write
into that entry.
Every candidate's output is checked against float64 (bench_gemv's max_rel_err_vs_float64; past REL_TOL the row
is marked "wrong", left out of the winners, and the run exits 1 at the end).
Knobs: SMALL=1: a smoke run (lavapipe-sized shapes, a few candidates).
R1 / R8="lanes,ft,unroll,threads[,row_groups[,prefetch]];...": the 1-row / 2..8-row candidates
(row_groups: threads sharing a weight load, each taking rows / row_groups rows of x, default 1; prefetch 1: a
step's weights loaded while the step before is summed, default 0). ROWS=1: only the 1-row shapes; ROWS=2..8:
the 8-row shapes and the decode step's fused forms (f16), with that many rows (BatchedDecoder's at B = ROWS);
ROWS=9..32: the same with the R8 candidates taking up to ROWS rows (max_rows), beside the planned tiled GEMM.
BUDGET_S (default 150): past it, the shapes left run the planned variant only (marked in the JSON), so the run
stays within a device session's limits. Printed: a line a shape (VERBOSE=1: a line a configuration), then per
shape the best TOP (default 5) and the planned, then per class the winner."""
import json
import os
import sys
import time
from pathlib import Path

import ab_registry

import attrs

SMALL = os.environ.get("SMALL") == "1"
OUT = Path(os.environ.get("OUT", "/tmp/gemv_ab"))
OUT.mkdir(parents=True, exist_ok=True)
BUDGET_S = float(os.environ.get("BUDGET_S", "150"))
EXP = Path("/tmp/gemv_ab_shaders")

# (lanes, features_per_lane, unroll, threads[, row_groups[, prefetch]]) per row count
R1 = [(32, 1, 4, 256), (64, 1, 4, 256), (128, 1, 4, 256), (256, 1, 2, 256), (32, 2, 4, 256), (64, 2, 4, 256),
      (32, 1, 8, 256)]
# 2..8 rows: gemv_r8's and gemv_r8_long's configurations, also prefetched ("_p"), 4 weight rows per slot; then
# row groups of 2, 4 and 8 (lanes = K-lanes x groups) with 2 to 8 weight rows per slot (each x load feeds them
# all: x is read n / features_per_lane times), some prefetched
R8 = [(64, 2, 1, 128), (256, 2, 1, 256), (64, 2, 1, 128, 1, 1), (256, 2, 1, 256, 1, 1), (32, 4, 1, 256, 1, 1),
      (64, 2, 1, 256, 2), (128, 2, 1, 256, 2, 1), (64, 4, 1, 256, 2), (128, 4, 1, 256, 2, 1),
      (64, 2, 1, 256, 4), (128, 2, 1, 256, 4), (256, 2, 1, 256, 4), (128, 4, 1, 256, 4), (128, 2, 2, 256, 4),
      (128, 2, 1, 256, 4, 1), (128, 4, 1, 256, 4, 1), (256, 4, 1, 256, 4, 1),
      (128, 2, 1, 128, 8), (256, 2, 1, 256, 8), (256, 4, 1, 256, 8), (256, 8, 1, 256, 8),
      (256, 2, 1, 256, 8, 1), (256, 4, 1, 256, 8, 1), (256, 8, 1, 256, 8, 1)]
# x staged in workgroup memory and dot() instead of fma4 were candidates until 2026-12-06 (h100-gemv-r8-fma-1206.log)
if SMALL:  # every 2..8-row candidate (each compiled and checked against float64 on the tiny shapes)
    R1 = R1[:1] + R1[4:5]
if os.environ.get("R1"):
    R1 = [tuple(int(v) for v in c.split(",")) for c in os.environ["R1"].split(";")]
if os.environ.get("R8"):
    R8 = [tuple(int(v) for v in c.split(",")) for c in os.environ["R8"].split(";")]
ROWS = int(os.environ["ROWS"]) if os.environ.get("ROWS") else None
MULTI_ROWS = max(8, ROWS or 0)  # the R8 candidates' max_rows
VERBOSE = os.environ.get("VERBOSE") == "1"  # a line per (shape, configuration) as it is timed
REL_TOL = 1e-4  # max |got - float64| / max |float64| of a right kernel (the H200 A/Bs: <= 4e-7)


def unpack(c) -> tuple[int, ...]:
    """A candidate as (lanes, features_per_lane, unroll, threads, row_groups, prefetch)."""
    return (*c, 1, 0)[:6] if len(c) == 4 else (*c, 0)[:6]


def config_name(rows: int, c) -> str:
    lanes, ft, unroll, threads, groups, prefetch = unpack(c)
    return (f"ab_r{rows}_l{lanes}_f{ft}_u{unroll}_t{threads}" + (f"_g{groups}" if groups > 1 else "")
            + ("_p" if prefetch else ""))


def write_registry():
    ab_registry.copy_shaders(EXP)
    entries = []
    for rows, configs in ((1, R1), (MULTI_ROWS, R8)):
        for c in configs:
            lanes, ft, unroll, threads, groups, prefetch = unpack(c)
            entries.append(f'[variants.{config_name(rows, c)}]\nmatrix = "gemv_weights"\nop = "linear"\n'
                           f'file = "gemv.wgsl"\nentry = "main"\n'
                           f'workgroup_size = [{threads}]\nfeatures = ["subgroup"]\n'
                           f'defines = {{ GEMV_ENTRY = "gemv_entry_subgroup.wgsl" }}\n'
                           f'limits = {{ max_rows = {rows}, lanes = {lanes}, features_per_lane = {ft}, unroll = {unroll}, '
                           f'row_groups = {groups}, prefetch = {prefetch} }}\n'
                           f'form = "gemv"\nweight_dtype = "{{dt}}"\nmin_k = 0\nmin_n = {1 << 30}\n')
    # never planned: a forced variant skips the speed rule min_n, the planner does not (past 8 rows it would
    # otherwise take them before the tiled GEMM)
    (EXP / "registry" / "zz_gemv_ab.toml").write_text("\n".join(entries))


def planned_variant(s) -> str:
    """The registry/gemv.toml entry that plans shape `s` now (its class), with the shape's fused norm and residual
    as the planned row ran it."""
    from wgraph.ops.dense import plan_linear
    return plan_linear(s.rows, s.out_features, s.in_features, s.weight_dtype, dev.caps, swiglu=s.swiglu, norm=s.norm,
                       residual=s.residual).variant


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
copy = gemv.copy_bandwidth(dev, gemv.copy_bytes(dev.caps, "quick" if SMALL else "full"))
print(f"copy kernel: {copy['gbps']:.1f} GB/s", flush=True)
floor = gemv.dispatch_floor(dev)
print(f"dispatch floor: {floor}", flush=True)
GRID = gemv.GEMV_GRIDS["tiny" if SMALL else "full"]
if ROWS is not None and ROWS > 1:  # 2..8 rows: the 8-row shapes and the fused decode forms (f16) with ROWS rows
    shapes = [attrs.evolve(s, rows=ROWS) for s in GRID if s.rows == (2 if SMALL else 8)]
    shapes += [attrs.evolve(s, rows=ROWS) for s in GRID if s.fused and s.weight_dtype == "f16"]
    shapes.sort(key=lambda s: s.weight_dtype != "f16")  # f16 (plain, then fused) first: past BUDGET_S, f32 goes
else:
    shapes = [s for s in GRID if ROWS is None or s.rows == ROWS]
RES = {"meta": report.machine_meta(dev, ["benchmarks/gemv_ab.py"]), "copy": copy, "dispatch_floor": floor,
       "torch": torch_info, "candidates": {"r1": R1, "r8": R8}, "rows": []}
RES["budget_s"] = BUDGET_S
for s in shapes:
    configs = R1 if s.rows == 1 else R8
    variants = [None] + [f"{config_name(1 if s.rows == 1 else MULTI_ROWS, c)}_{s.weight_dtype}" for c in configs]
    if time.perf_counter() - t0 > BUDGET_S:
        variants = [None]
        RES.setdefault("planned_only_past_budget", []).append(s.label())
    rows = gemv.bench_gemv(dev, [s], copy_gbps=copy["gbps"], use_torch=True,
                           torch_available=bool(torch_info.get("available")), variants=variants,
                           target_us=300.0 if SMALL else 2000.0,
                           progress=(lambda m: print(m, flush=True)) if VERBOSE else None)
    if not VERBOSE:  # one line a shape (the summary below has every configuration)
        ok = sorted((r for r in rows if r["status"] == "ok"), key=lambda r: r["gpu_us"])
        print(f"[{shapes.index(s) + 1}/{len(shapes)} {time.perf_counter() - t0:.0f} s] {s.label()}: "
              + (f"best {ok[0]['config']} {ok[0]['gpu_us']:.1f} us of {len(ok)} ok" if ok else "none ok")
              + (f", {len(rows) - len(ok)} not ok" if len(ok) < len(rows) else ""), flush=True)
    for r in rows:
        r["planned_variant"] = planned_variant(s)
        if r["status"] == "ok" and not r.get("max_rel_err_vs_float64", 1.0) <= REL_TOL:  # NaN too
            r.update(status="wrong", note=f"max rel err vs float64 {r.get('max_rel_err_vs_float64')} > {REL_TOL}")
            print(f"WRONG: {s.label()} {r['config']}: {r['note']}", flush=True)
    RES["rows"] += rows
    (OUT / "gemv_ab.json").write_text(json.dumps(RES, indent=1, default=str))

# ---- per shape: every configuration by GPU time, best first ----
TOP = int(os.environ.get("TOP", "5"))
print(f"\n== per shape: GPU us (fraction of copy), the best {TOP} and the planned; torch beside the planned variant ==")
per_shape = {}
for r in RES["rows"]:
    if r["status"] == "ok":
        per_shape.setdefault(gemv.GemvShape(**{k: r[k] for k in ("rows", "out_features", "in_features", "weight_dtype",
                                                                    "matrix", "norm", "swiglu", "residual")}), []).append(r)
for s, rs in per_shape.items():
    rs.sort(key=lambda r: r["gpu_us"])
    planned = next((r for r in rs if r["config"] == "planned"), {})
    torch_part = f" torch {planned['torch_us']:.1f}" if planned.get("torch_us") else ""
    print(f"{s.label()}{torch_part} (planned: {planned.get('variant')})")
    shown = rs[:TOP] + [r for r in rs[TOP:] if r["config"] == "planned"]  # the best TOP, and the planned one
    print("   " + "; ".join(f"{r['config'].replace('ab_', '').rsplit('_', 1)[0] if r['config'] != 'planned' else 'PLANNED'} "
                           f"{r['gpu_us']:.1f} ({r.get('fraction_of_copy', 0):.2f})" for r in shown))

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
                                       f"row_groups = {k.limits['row_groups']}, prefetch = {k.limits['prefetch']}, "
                                       f"workgroup_size = [{k.threads}]" if k else ""))
    summary[f"{cls} {dt} {sw}".strip()] = {"shapes": sorted(map(list, shapes_of)), "totals_us": totals, "best": best}
RES["summary"] = summary
RES["elapsed_s"] = time.perf_counter() - t0
(OUT / "gemv_ab.json").write_text(json.dumps(RES, indent=1, default=str))
print(f"\nwrote {OUT / 'gemv_ab.json'} in {RES['elapsed_s']:.0f} s")
checked = [r for r in RES["rows"] if r["status"] in ("ok", "wrong")]
bad = [r for r in RES["rows"] if r["status"] in ("wrong", "error")]
print(f"{len(checked)} (shape, configuration) rows checked against float64 (rel tol {REL_TOL}); "
      f"{sum(r['status'] == 'wrong' for r in bad)} wrong, {sum(r['status'] == 'error' for r in bad)} errors"
      + "".join(f"\n  {r['status']}: {r['config']} {r['note'][:300]}" for r in bad))
if bad:
    sys.exit(1)
