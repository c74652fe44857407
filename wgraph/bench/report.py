"""Machine facts, the printed tables, and the JSON file."""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import wgpu

import wgraph
from wgraph.bench.timing import REPLAY_CALLS


def _git(*args) -> str | None:
    try:
        root = Path(wgraph.__file__).resolve().parent.parent
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=5).stdout.strip() or None
    except Exception:  # noqa: BLE001 - not a checkout: no commit to report
        return None


def machine_meta(dev, argv: list[str]) -> dict:
    info = dev.adapter.info
    try:
        from wgpu.backends import wgpu_native

        native = wgpu_native.__version__
    except Exception:  # noqa: BLE001
        native = None
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "machine": {"node": platform.node(), "platform": platform.platform(), "processor": platform.processor(),
                    "machine": platform.machine(), "cpu_count": os.cpu_count()},
        "adapter": dev.caps.adapter_name,
        "adapter_info": {k: info.get(k) for k in info},
        "driver": info.get("description"),
        "backend": dev.caps.backend,
        "adapter_type": info.get("adapter_type"),
        "caps": {"has_f16": dev.caps.has_f16, "has_subgroups": dev.caps.has_subgroups,
                 "has_timestamps": dev.caps.has_timestamps,
                 "has_timestamps_inside_passes": dev.caps.has_timestamps_inside_passes},
        "wgpu_version": wgpu.__version__,
        "wgpu_native_version": native,
        "wgraph_version": wgraph.__version__,
        "python": sys.version.split()[0],
        "numpy": __import__("numpy").__version__,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(dirty) if dirty is not None else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python -m wgraph", *argv]),
    }


def _f(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def host_table(rows: list[dict]) -> str:
    head = (f"{'mode':30} {'host us/op':>10} {'disp/op':>7} {'x floor':>8} {'wall us/op':>10} {'x floor':>8} "
            f"{'submits':>7} {'passes':>6} {'vs immediate':>12}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"{r['mode']:30} {r['status']}: {r['note']}")
            continue
        # the x floor columns are None when the raw loop's row failed: "-", not a crash of the whole table
        lines.append(f"{r['mode']:30} {r['host_us_per_op']:10.2f} {r.get('dispatches_per_op', 1):7.1f} "
                     f"{_f(r['ratio_to_floor_host'], '8.2f'):>8} {r['wall_us_per_op']:10.2f} "
                     f"{_f(r['ratio_to_floor_wall'], '8.2f'):>8} "
                     f"{r['submits_per_run']:7d} {r['compute_passes_per_run']:6d} "
                     f"{_f(r['speedup_vs_immediate_host'], '11.1f')}x")
    lines.append("host = until queue.submit returns (CPU cost to the caller); wall = host + waiting for the GPU. "
                 "Median of the runs, per op; x floor compares per dispatch (an op's time / its dispatches) "
                 "with the raw loop's per dispatch in the same run (the modes take turns within each run), "
                 "median over the runs.")
    return "\n".join(lines)


def fma_peak_tflops(result: dict, dtype: str) -> float | None:
    """The FMA microbenchmark's best TFLOP/s for `dtype` in this run (wgraph/bench/fma.py's rows whose `type`
    names it: f16 takes f16, vec2f16 and vec4f16), or None when the run has none."""
    rows = (result.get("fma") or {}).get("rows") or []
    got = [r["tflops"] for r in rows if r.get("status") == "ok" and dtype in r["type"]]
    return max(got) if got else None


def add_fma_fractions(result: dict) -> None:
    """f16 prefill rows get `fraction_of_fma_peak` (their TFLOP/s over the f16 FMA peak measured in the same run)."""
    peak = fma_peak_tflops(result, "f16")
    if not peak:
        return
    for r in (result.get("attention") or {}).get("rows", []):
        if r.get("phase") == "prefill" and r.get("dtype") == "f16" and r.get("tflops"):
            r["fraction_of_fma_peak"] = r["tflops"] / peak


def fma_fraction_lines(result: dict) -> str:
    """One line per f16 prefill row that has a fraction of the FMA peak; empty when none has."""
    peak = fma_peak_tflops(result, "f16")
    return "\n".join(f"S={r['S']} Hq/Hkv={r['Hq']}/{r['Hkv']} D={r['D']} {r['variant']}: {r['tflops']:.4g} TFLOP/s = "
                     f"{r['fraction_of_fma_peak']:.3f} of {peak:.4g}"
                     for r in (result.get("attention") or {}).get("rows", []) if "fraction_of_fma_peak" in r)


def attention_table(rows: list[dict]) -> str:
    head = (f"{'phase':7} {'S':>5} {'L':>6} {'Hq/Hkv':>6} {'D':>4} {'dtype':5} {'variant':28} {'tier':12} "
            f"{'gpu us':>10} {'thru':>10} {'unit':7} {'torch':>9} {'ratio':>7} {'replay us':>9} {'host us':>7} "
            f"{'ratio':>7} {'of FMA':>6} {'graph us':>8} {'ratio':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        shape = f"{r['phase']:7} {r['S']:5d} {r['L']:6d} {str(r['Hq']) + '/' + str(r['Hkv']):>6} {r['D']:4d} {r['dtype']:5}"
        if r["status"] != "ok":
            lines.append(f"{shape} {str(r.get('variant') or '-'):28} {r['status']}: {r['note'][:90]}")
            continue
        prefill = r["phase"] == "prefill"
        thru = r.get("tflops") if prefill else r.get("gbps")
        torch = r.get("torch_tflops") if prefill else r.get("torch_gbps")
        name = r["variant"] + ("*" if r.get("forced") else "")
        lines.append(f"{shape} {name:28} {str(r['tier']):12} {_f(r['gpu_us'] or r['wall_us'], '10.1f')} "
                     f"{_f(thru, '10.4g')} {'TFLOP/s' if prefill else 'GB/s':7} "
                     f"{_f(torch, '9.4g')} {_f(r.get('ratio_to_torch'), '7.3g')} {_f(r.get('replay_us'), '9.1f')} "
                     f"{_f(r.get('replay_host_us'), '7.1f')} {_f(r.get('ratio_to_torch_replay'), '7.3g')} "
                     f"{_f(r.get('fraction_of_fma_peak'), '6.2f')} "
                     f"{_f(r.get('torch_graph_us'), '8.1f')} {_f(r.get('ratio_to_torch_graph_replay'), '7.3g')}")
    lines.append("gpu us: timestamp queries around the op's dispatches (median), else wall time with a GPU wait. "
                 "ratio = torch time / wgraph time (> 1: wgraph faster). * = variant forced, not planned. "
                 f"replay us (decode): a compiled Program of {REPLAY_CALLS} calls replayed back to back, wall clock "
                 "(no timestamps between dispatches), and its ratio to torch; host us: the host's encode and submit "
                 "time per call in those replays (past 0.8 of replay us the host, not the GPU, sets the replay's "
                 "pace). of FMA: f16 prefill TFLOP/s over the f16 "
                 "FMA peak of the same run (bench --only fma). graph us (decode): torch's call replayed from a CUDA "
                 "graph (no host launch cost), and the replay's ratio to it.")
    return "\n".join(lines)


def gemv_table(copy: dict, rows: list[dict], floor: dict | None = None) -> str:
    lines = [f"copy kernel: {copy['gbps']:.4g} GB/s ({copy['bytes_copied'] >> 20} MiB read + written, "
             f"{copy['gpu_us']:.1f} us)"]
    if floor and floor.get("gpu_us"):
        lines.append(f"dispatch floor: {floor['gpu_us']:.2f} us per call of a linear on an [8, 256] weight in a chain "
                     f"of calls" + (f" ({floor['gpu_us_stamped_per_dispatch']:.2f} us with timestamps around each)"
                                    if floor.get("gpu_us_stamped_per_dispatch") else ""))
    head = (f"{'matrix':28} {'M':>2} {'out':>7} {'in':>6} {'W':4} {'fused':20} {'variant':26} {'gpu us':>8} "
            f"{'GB/s':>6} {'of copy':>7} {'ceiling':>7} {'torch us':>8} {'ratio':>6}")
    lines += [head, "-" * len(head)]
    for r in rows:
        shape = (f"{r.get('matrix', '')[:28]:28} {r['rows']:2d} {r['out_features']:7d} {r['in_features']:6d} "
                 f"{r['weight_dtype']:4} {'+'.join(k for k in ('norm', 'swiglu', 'residual') if r.get(k))[:20]:20}")
        name = r.get("variant", "") if r.get("config") in (None, "planned") else r["config"]
        if r["status"] != "ok":
            lines.append(f"{shape} {name[:26]:26} {r['status']}: {r['note'][:80]}")
            continue
        lines.append(f"{shape} {name[:26]:26} {r['gpu_us']:8.2f} {r['gbps']:6.0f} "
                     f"{_f(r.get('fraction_of_copy'), '7.3f')} {_f(r.get('read_same_bytes_fraction'), '7.3f')} "
                     f"{_f(r.get('torch_us'), '8.2f')} "
                     f"{_f(r.get('ratio_to_torch'), '6.3g')}")
    lines.append("GB/s: (W + x + y (+ residual, norm weight) bytes) / GPU time per call, calls chained in one pass; "
                 "of copy: fraction of the copy kernel's bandwidth in this run; ceiling: the fraction a kernel that only "
                 "reads reaches on the row's bytes in a chain of calls (floor and ramp included: no one-pass kernel "
                 "over that many bytes does better); ratio = torch time / wgraph time "
                 "(torch: F.linear alone on fused rows).")
    return "\n".join(lines)


NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def strict(x):
    """`x` as strict JSON data: a non-finite float (a kernel that wrote NaN makes its error field NaN) as the string
    "NaN", "Infinity" or "-Infinity" (float() reads each back), where json.dumps wrote the bare NaN and Infinity
    that strict readers (jq, JavaScript, most JSON libraries) refuse; a numpy scalar as the Python number it holds
    (json.dumps's default=str wrote np.float32(1.5) as the string "1.5")."""
    if isinstance(x, float):
        return x if math.isfinite(x) else NON_FINITE[repr(float(x))]
    if isinstance(x, np.generic):
        return strict(x.item())
    if isinstance(x, dict):
        return {k: strict(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [strict(v) for v in x]
    return x


def write_json(path: str | os.PathLike, result: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(strict(result), indent=1, default=str) + "\n")
    return path
