"""`python -m wgraph bench`: host cost per dispatch in each mode, memory bandwidth and the decode GEMV, the FMA
peak and the prefill GEMM, attention throughput; torch beside each where it is importable."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import attrs

from wgraph.bench.grids import GRIDS
from wgraph.cli_format import DefaultsFormatter, unwritable

DEFAULT_BUDGET_S = {"tiny": 60.0, "quick": 75.0, "small": 240.0, "full": 420.0, "decode": 180.0, "prefill": 240.0}
SECTIONS = ("host", "gemv", "fma", "gemm", "attention", "batched", "model", "batched_model", "quant")


@attrs.frozen
class QuickPlan:
    """What `--quick` runs: the two numbers a user picks wgraph for (host cost per dispatch, attention
    throughput) at sizes lavapipe finishes in seconds. Every other section runs with `--only NAME --quick`."""

    sections: tuple[str, ...] = ("host", "attention")
    host_ops: int = 200      # dispatches per host-cost run and mode (1000 without --quick)
    runs: int = 3            # host-cost runs per mode (9 without --quick)
    grid: str = "quick"      # attention shapes
    seconds: int = 20        # what it takes on lavapipe with 2 CPU cores (measured: docs/benchmarks.md)

    def describe(self) -> str:
        return (f"only the {' and '.join(self.sections)} sections: {self.host_ops} dispatches x {self.runs} runs per "
                f"host-cost mode, the {self.grid} grid ({len(GRIDS[self.grid])} lavapipe-sized attention shapes); "
                f"about {self.seconds} s on lavapipe with 2 CPU cores")


QUICK_PLAN = QuickPlan()
QUICK = QUICK_PLAN.describe()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m wgraph bench", description=__doc__, formatter_class=DefaultsFormatter)
    p.add_argument("--quick", action="store_true", help=QUICK)
    p.add_argument("--json", metavar="PATH", help="write every row and the machine facts to PATH")
    p.add_argument("--plot", metavar="PATH", help="also plot attention throughput vs size, wgraph beside torch, to "
                   "PATH (.png or .svg; needs pip install wgraph[plot]); from a saved JSON: python -m wgraph plot")
    p.add_argument("--only", type=_sections, metavar="SECTION[,SECTION...]",
                   help=f"run these sections, in the bench's order ({', '.join(SECTIONS)}; with --quick: at their "
                   "quick sizes); e.g. fma,attention puts the f16 prefill rows beside the FMA peak of the same run")
    p.add_argument("--grid", choices=sorted(GRIDS), help="attention shapes (default: full; quick with --quick)")
    p.add_argument("--variants", choices=("planned", "all"), default="planned",
                   help="planned: the planner's pick per shape; all: also every other variant that accepts it "
                   "(attention, gemm)")
    p.add_argument("--host-ops", type=int, help=f"dispatches per host-cost run (default 1000, {QUICK_PLAN.host_ops} "
                   f"with --quick; at most {MAX_HOST_OPS})")
    p.add_argument("--runs", type=int, help=f"host-cost runs per mode (median; default 9, {QUICK_PLAN.runs} with "
                   f"--quick; at most {MAX_RUNS})")
    p.add_argument("--budget-s", type=_seconds, help="seconds for the attention section and for the gemm section; "
                   "shapes left are listed skipped (default by grid: "
                   f"{', '.join(f'{g} {b:g}' for g, b in DEFAULT_BUDGET_S.items())})")
    p.add_argument("--no-torch", action="store_true", help="do not run the torch SDPA reference")
    p.add_argument("--profile", action="store_true", help="model section: GPU time of one decode step per node "
                   "(timestamp queries), printed by op and by layer: where a token's time goes")
    return p


def _sections(text: str) -> tuple[str, ...]:
    """--only's value: section names, comma-separated, each once and known (argparse reports the error)."""
    names = tuple(t.strip() for t in text.split(","))
    unknown = [n for n in names if n not in SECTIONS]
    if unknown or len(set(names)) != len(names) or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: sections are {', '.join(SECTIONS)}, each at most once"
                                         + (f" ({', '.join(map(repr, unknown))} is not one)" if unknown else ""))
    return names


def _seconds(text: str) -> float:
    """--budget-s's value: a finite number of seconds > 0, refused with the text as typed (checked after float(),
    1e400 was shown as inf and -1 as -1.0)."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r}")
    return value


def _progress(msg: str):
    print(msg, file=sys.stderr, flush=True)


MAX_HOST_OPS, MAX_RUNS = 1_000_000, 1000   # --host-ops, --runs


def main(argv: list[str]) -> dict:
    """Run the benchmark; print tables; return (and with --json write) the result."""
    ap = parser()
    args = ap.parse_args(argv)
    # at most: a host-cost run records --host-ops dispatches in one graph (2**64 grew it until memory ran out)
    for name, value, most in (("--runs", args.runs, MAX_RUNS), ("--host-ops", args.host_ops, MAX_HOST_OPS)):
        if value is not None and not 1 <= value <= most:
            ap.error(f"{name} {value} must be in [1, {most}]")
    for name, path in (("--json", args.json), ("--plot", args.plot)):
        # before the run, not after it: a path that cannot be written raised a traceback once the run was over
        # `is not None`: --json "" was falsy, so neither checked nor written (the run's results silently unsaved)
        why = path is not None and unwritable(path)
        if why:
            ap.error(f"{name} {path or repr(path)}: {why}")
    if args.json and args.plot and Path(args.json).resolve() == Path(args.plot).resolve():
        # the plot was written over the JSON after the run: the results lost, exit 0
        ap.error(f"--json and --plot name one file, {args.plot}: the plot would replace the results")
    running = args.only or (QUICK_PLAN.sections if args.quick else SECTIONS)
    # an option only some sections read, given where none of them runs, was accepted and ignored (--quick --profile
    # printed no profile, --only gemv --runs 21 ran what it would have run anyway): said before the run instead
    for option, given, readers in (("--profile", args.profile, ("model", "batched_model")),
                                   ("--variants all", args.variants == "all", ("attention", "gemm")),
                                   ("--host-ops", args.host_ops is not None, ("host",)),
                                   ("--runs", args.runs is not None, ("host",)),
                                   ("--budget-s", args.budget_s is not None, ("attention", "gemm"))):
        if given and not set(readers) & set(running):
            ap.error(f"{option} is read by the {' and '.join(readers)} section{'s' * (len(readers) > 1)} only; "
                     f"{'--only ' + ','.join(running) if args.only else '--quick'} runs none of them")
    if args.plot and "attention" not in running:
        # the plot draws the attention rows: without them it raised ValueError after the whole run
        ap.error(f"--plot draws the attention section's rows; --only {','.join(args.only or ())} runs none of them")
    if args.plot:
        from wgraph.bench.plot import check_plot_path

        try:  # before the run: a missing matplotlib is not worth finding out minutes later
            check_plot_path(args.plot)
        except (ImportError, ValueError) as e:
            ap.exit(2, f"python -m wgraph bench: {e}\n")
    import wgraph as wg
    from wgraph.bench import attention, host, report

    grid = args.grid or (QUICK_PLAN.grid if args.quick else "full")
    runs = args.runs if args.runs is not None else (QUICK_PLAN.runs if args.quick else 9)
    host_ops = args.host_ops if args.host_ops is not None else (QUICK_PLAN.host_ops if args.quick else 1000)
    chosen = args.only or (QUICK_PLAN.sections if args.quick else SECTIONS)
    sections = tuple(s for s in SECTIONS if s in chosen)  # the bench's order
    budget = args.budget_s if args.budget_s is not None else DEFAULT_BUDGET_S[grid]
    dev = wg.default_device()
    result = {"meta": report.machine_meta(dev, ["bench", *argv]),
              "settings": {"grid": grid, "variants": args.variants, "host_ops": host_ops, "runs": runs,
                           "budget_s": budget, "quick": args.quick, "sections": list(sections)}}
    t0 = time.perf_counter()
    print(f"wgraph bench on {dev.caps.adapter_name} ({dev.caps.backend}), wgpu {result['meta']['wgpu_version']}")
    if "host" in sections:
        rows = host.bench_host(dev, n_ops=host_ops, runs=runs, progress=_progress)
        result["host"] = {"rows": rows, "workload": f"{host_ops} scale dispatches on {host.ELEMENTS} f32 "
                          "elements (ping-pong between two tensors)",
                          "clocks": {"host": "perf_counter until queue.submit returned",
                                     "wall": "host + waiting for the GPU (map of a small buffer)"}}
        print("\n== host cost per dispatch ==")
        print(report.host_table(rows))
    if "gemv" in sections:
        from wgraph.bench import gemv, torch_ref

        torch_info = torch_ref.probe() if not args.no_torch else {"available": False, "note": "disabled (--no-torch)"}
        copy = gemv.copy_bandwidth(dev, gemv.copy_bytes(dev.caps, section_grid(grid, gemv.COPY_BYTES)))
        _progress(f"copy kernel: {copy['gbps']:.4g} GB/s over {copy['bytes_copied'] >> 20} MiB")
        floor = gemv.dispatch_floor(dev)
        rows = gemv.bench_gemv(dev, gemv.GEMV_GRIDS[section_grid(grid, gemv.GEMV_GRIDS)], copy_gbps=copy["gbps"], use_torch=not args.no_torch,
                               torch_available=bool(torch_info.get("available")),
                               target_us=300.0 if args.quick or grid == "tiny" else 3000.0, progress=_progress)
        result["gemv"] = {"copy": copy, "rows": rows, "torch": torch_info, "dispatch_floor": floor,
                          "bytes": "W once + x + y (f32) (+ residual, norm weight); GB/s = bytes / GPU time per call",
                          "timing": "calls chained (one output) in one compute pass stamped at its start and end"}
        print(f"\n== memory bandwidth and GEMV ({grid} grid) ==")
        print(report.gemv_table(copy, rows, floor))
    if "fma" in sections or "gemm" in sections:
        _gemm_section(dev, args, grid, budget, result, sections)
    if "attention" in sections:
        ok, note = attention.available()
        shapes = GRIDS[grid]
        rows, torch_info = attention.bench_attention(
            dev, shapes, variants=args.variants, budget_s=budget, use_torch=not args.no_torch,
            target_s=0.05 if args.quick or grid == "tiny" else 0.3, progress=_progress)
        result["attention"] = {"rows": rows, "available": ok, "note": note, "torch": torch_info}
        report.add_fma_fractions(result)   # when the FMA section ran before it in this process
        print(f"\n== attention ({grid} grid, {len(shapes)} shapes, variants: {args.variants}) ==")
        if not ok:
            print(note)
        else:
            if not torch_info.get("available"):
                print(f"torch reference: {torch_info.get('note')}")
            print(report.attention_table(rows))
    if "batched" in sections:
        from wgraph.bench import batched

        rows, torch_info = batched.bench_batched(dev, section_grid(grid, batched.GRIDS),
                                                 use_torch=not args.no_torch,
                                                 target_s=0.05 if args.quick or grid == "tiny" else 0.3,
                                                 progress=_progress)
        result["batched"] = {"rows": rows, "torch": torch_info}
        print(f"\n== batched attention ({grid} grid, {len(rows)} shapes) ==")
        if not torch_info.get("available"):
            print(f"torch reference: {torch_info.get('note')}")
        print(batched.table(rows))
    if "model" in sections:
        _model_section(dev, args, grid, result)
    if "batched_model" in sections:
        _batched_model_section(dev, args, grid, result)
    if "quant" in sections:
        _quant_section(dev, args, grid, result)
    report.add_fma_fractions(result)
    fractions = report.fma_fraction_lines(result)
    if fractions:
        print("\n== f16 prefill as a fraction of the f16 FMA peak of this run ==")
        print(fractions)
    result["elapsed_s"] = time.perf_counter() - t0
    if args.json:
        path = report.write_json(args.json, result)
        print(f"\nwrote {path}")
    if args.plot:
        from wgraph.bench.plot import plot_result

        try:   # no attention row that ran (every shape failed here) raised ValueError: a traceback after the run
            print(f"wrote {plot_result(result, args.plot)}")
        except (ValueError, OSError) as e:
            saved = f" (the results are in {args.json})" if args.json else ""
            ap.exit(1, f"python -m wgraph bench: --plot {args.plot} not written: {e}{saved}\n")
    return result


def section_grid(grid: str, grids) -> str:
    """The grid a section runs under `grid`: its own of that name, else its full sizes (the decode grid is
    attention's alone: --only attention,batched --grid decode runs the batched rows at their full sizes)."""
    return grid if grid in grids else "full"


def _gemm_section(dev, args, grid: str, budget: float, result: dict, sections: tuple[str, ...]):
    """The FMA peak (the ALU ceiling) and, when the gemm section runs, the prefill GEMM rows (wgraph/bench/gemm.py)."""
    from wgraph.bench import fma, gemm, torch_ref

    quick = args.quick or grid == "tiny"
    fma.section(dev, result, quick=quick, progress=_progress)
    print("\n== FMA peak (ALU ceiling: FMA chains in registers) ==")
    print(fma.table(result["fma"]))
    if "gemm" not in sections:
        return
    # the full grid is minutes of 4096-row GEMMs: a CPU adapter takes the quick one unless a grid is asked for,
    # and a run of every section the small one at most (--only gemm for the rest)
    name = args.grid or ("quick" if args.quick or dev.caps.is_cpu else "full")
    if name not in gemm.GEMM_GRIDS or (len(sections) > 1 and name == "full"):
        name = "small"
    torch_info = torch_ref.probe() if not args.no_torch else {"available": False, "note": "disabled (--no-torch)"}
    peak = fma.peak_tflops(result, "f32")
    shapes = gemm.GEMM_GRIDS[name]
    rows = gemm.bench_gemm(dev, shapes, peak_tflops=peak, variants=args.variants,
                           use_torch=bool(torch_info.get("available")), budget_s=budget,
                           target_s=0.05 if quick else 0.1, progress=_progress)
    result["gemm"] = {"rows": rows, "torch": torch_info, "grid": name, "fma_f32_tflops": peak,
                      "flops": "2 * rows * out_features * in_features per call"}
    print(f"\n== prefill GEMM ({name} grid, {len(shapes)} shapes, variants: {args.variants}) ==")
    if not torch_info.get("available"):
        print(f"torch reference: {torch_info.get('note')}")
    print(gemm.table(rows, peak))


def _model_section(dev, args, grid: str, result: dict):
    """Llama decode (wgraph/bench/model.py): the 1B and 8B shapes; a failure becomes a row's note, never the
    bench's end."""
    from wgraph.bench import model

    quick = args.quick or grid == "tiny"
    try:
        rows = model.bench_models(dev, quick=quick, copy_gbps=model.copy_gbps(dev, result, quick),
                                  use_torch=not args.no_torch, progress=_progress, profile=args.profile)
    except Exception as e:  # noqa: BLE001 - report it and carry on
        rows = [{"status": "error", "note": f"{type(e).__name__}: {e}"}]
    result["model"] = {"rows": rows}
    print("\n== model: Llama greedy decode ==")
    for row in rows:
        print(model.table(row))


def _batched_model_section(dev, args, grid: str, result: dict):
    """B sequences decoded at once (wgraph/bench/batched_model.py): B = 1, 8, 32 of the 1B shape beside torch."""
    from wgraph.bench import batched_model

    try:
        out = batched_model.bench_batched_models(dev, quick=args.quick or grid == "tiny", use_torch=not args.no_torch,
                                                 progress=_progress, profile=args.profile)
    except Exception as e:  # noqa: BLE001 - report it and carry on
        out = {"status": "error", "note": f"{type(e).__name__}: {e}", "rows": []}
    result["batched_model"] = out
    print("\n== batched model: B sequences decoded at once, greedy ==")
    print(batched_model.table(out) if "model" in out else f"error: {out['note']}")


def _quant_section(dev, args, grid: str, result: dict):
    """GEMV on GGML blocks and the quantized decode (wgraph/bench/quant.py)."""
    from wgraph.bench import gemv, quant, torch_ref
    from wgraph.bench.model import LLAMA_1B

    big = not (args.quick or grid in ("tiny", "quick") or dev.caps.is_cpu)
    use_torch = not args.no_torch and bool(torch_ref.probe().get("available"))
    target_s = 0.1 if big else 0.03
    copy = (result.get("gemv", {}).get("copy")
            or gemv.copy_bandwidth(dev, gemv.copy_bytes(dev.caps, "full" if big else "tiny")))
    floor = quant.dispatch_floor(dev, target_s)
    rows = quant.bench_quant_gemv(dev, quant.gemv_shapes(big), copy_gbps=copy["gbps"], all_variants=big,
                                  use_torch=use_torch, target_s=target_s, progress=_progress)
    try:
        models = quant.bench_quant_models(dev, big=big, copy_gbps=copy["gbps"], use_torch=use_torch,
                                          progress=_progress)
    except Exception as e:  # noqa: BLE001 - report it and carry on
        models = [{"model": "quantized decode", "status": "error", "note": f"{type(e).__name__}: {e}"}]
    sums = quant.step_gemv_sums(rows, LLAMA_1B["num_hidden_layers"]) if big else []
    result["quant"] = {"copy": copy, "dispatch_floor": floor, "gemv": rows, "step_gemv_sums": sums, "models": models,
                       "bytes": "GEMV: blocks once + x + y (f32); decode: weight bytes a step reads"}
    print(f"\n== quantized weights: GEMV on GGML blocks ({'Llama-3.2-1B' if big else 'small'} shapes) ==")
    print(quant.gemv_table(copy, floor, rows, sums))
    print(f"\n== quantized decode ({'Llama-3.2-1B' if big else 'tiny'} shape, greedy) ==")
    print(quant.model_table(models))
