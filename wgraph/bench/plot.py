"""Plots of a bench result: attention throughput vs size, one line per path (heads, head dim; the variant too
when forced), wgraph solid and torch SDPA dashed beside it where the result has torch rows. One panel per
(phase, dtype), log-log: prefill TFLOP/s vs S, decode GB/s vs L. matplotlib is an optional extra (wgraph[plot])."""

from __future__ import annotations

import json
import math
from pathlib import Path

FORMATS = (".png", ".svg")


def check_plot_path(path) -> Path:
    """The path, once its format is known and matplotlib importable; errors say what to do."""
    typed, path = path, Path(path)   # the message shows the path as typed: Path("") is "."
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"plot path {str(typed)!r}: the format comes from the extension, one of {FORMATS}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError("plotting needs matplotlib, an optional extra: pip install wgraph[plot] "
                          "(or pip install matplotlib)") from None
    return path


def _positive(i: int, row: dict, key: str, *, required: bool = False):
    """row[key] where the row has it (None where it has not, unless `required`): a positive finite number (the
    axes are log), else a ValueError naming the row, the key and the value. A string was drawn as a category axis
    and the plot written; inf, 0 or a negative number (or a panel of missing values) raised matplotlib's 'Data
    cannot be log-scaled'."""
    value = row.get(key)
    if value is None and not required:
        return None
    try:   # an integer past the float range (10**400 in the file) raised OverflowError, a traceback, as it was drawn
        number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    except OverflowError:
        number = math.inf
    if not 0 < number < math.inf:
        raise ValueError(f"attention row {i} ({row.get('phase')} {row.get('dtype')}): {key}={_short(value)} is not "
                         "a positive finite number, as a bench result's are (the plot's axes are log)")
    return number


def _short(value) -> str:
    """repr(value), cut to 60 characters: a hand-edited file's value may be a whole list."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _object(value, where: str) -> dict:
    """`value` where the bench writes an object (a JSON {}): else a ValueError naming the field. A list or a
    number there raised AttributeError, said only as "'list' object has no attribute 'get'"."""
    if not isinstance(value, dict):
        raise ValueError(f"{where} is {_short(value)}, not an object as python -m wgraph bench --json writes")
    return value


def _text(i: int, row: dict, key: str, allowed: tuple[str, ...] | None = None):
    """row[key], a string (one of `allowed` where given), else a ValueError naming the row and the key."""
    value = row.get(key)
    if not isinstance(value, str) or (allowed and value not in allowed):
        rule = f"one of {', '.join(allowed)}" if allowed else "a string"
        raise ValueError(f"attention row {i}: {key}={_short(value)} is not {rule}, as a bench result's is")
    return value


def _series(rows: list[dict]) -> dict:
    """{(phase, dtype): {label: [(size, wgraph, torch or None)]}} from the rows that ran and have a wgraph
    throughput (bench leaves it out where no time was measured)."""
    if not isinstance(rows, list):
        raise ValueError(f"attention.rows is {_short(rows)}, not a list of rows as python -m wgraph bench --json "
                         "writes")
    panels: dict = {}
    for i, r in enumerate(rows):
        if _object(r, f"attention row {i}").get("status") != "ok":
            continue
        prefill = _text(i, r, "phase", ("prefill", "decode")) == "prefill"
        _text(i, r, "dtype")
        missing = [k for k in ("Hq", "Hkv", "D") + (("variant",) if r.get("forced") else ()) if k not in r]
        if missing:
            raise ValueError(f"attention row {i} ({r['phase']} {r['dtype']}) has no {', '.join(missing)}: every "
                             "row that ran has them")
        label = f"{r['Hq']}/{r['Hkv']} heads, D={r['D']}" + (f", {r['variant']}" if r.get("forced") else "")
        size = _positive(i, r, "S" if prefill else "L", required=True)
        ours = _positive(i, r, "tflops" if prefill else "gbps")
        theirs = _positive(i, r, "torch_tflops" if prefill else "torch_gbps")
        if ours is None:   # no time measured: nothing to draw
            continue
        panels.setdefault((r["phase"], r["dtype"]), {}).setdefault(label, []).append((size, ours, theirs))
    return panels


def plot_result(result: dict, path) -> Path:
    """Write the throughput plot of a bench result (the dict `bench` returns or its JSON) to path (.png/.svg)."""
    path = check_plot_path(path)
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    if not isinstance(result, dict):
        raise ValueError(f"the file holds {_short(result)}, not an object: it is not a result of python -m wgraph "
                         "bench --json")
    attention = _object(result.get("attention", {}), "attention")
    panels = _series(attention.get("rows", []))
    if not panels:
        raise ValueError("the bench result has no attention rows that ran: nothing to plot")
    keys = sorted(panels, key=lambda k: (k[0] != "prefill", k[1]))
    cols = min(2, len(keys))
    rows = -(-len(keys) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(8.5 * cols, 4.8 * rows), squeeze=False)
    for ax in axes.flat[len(keys):]:
        ax.set_visible(False)
    has_torch = False
    for ax, key in zip(axes.flat, keys):
        phase, dtype = key
        for i, (label, points) in enumerate(sorted(panels[key].items())):
            points.sort(key=lambda p: p[0])   # by size alone: a tie went on to compare a torch value with None
            color = f"C{i % 10}"
            sizes = [p[0] for p in points]
            ax.plot(sizes, [p[1] for p in points], "o-", color=color, label=f"wgraph {label}")
            theirs = [(s, t) for s, _, t in points if t is not None]
            if theirs:
                has_torch = True
                ax.plot(*zip(*theirs), "x--", color=color, alpha=0.7, label=f"torch {label}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")  # wgraph and torch can be two orders of magnitude apart (tensor cores)
        ax.set_xlabel("S = L (queries = keys)" if phase == "prefill" else "L (keys; one query)")
        ax.set_ylabel("TFLOP/s" if phase == "prefill" else "GB/s")
        ax.set_title(f"{phase} {dtype}")
        ax.grid(True, which="both", alpha=0.3)
        # beside the panel, never over it: the curves fill the panel (a prefill panel has many lines)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    meta = _object(result.get("meta", {}), "meta")
    commit = str(meta.get("git_commit") or "")[:10]
    torch = _object(attention.get("torch", {}), "attention.torch")
    beside = f"; dashed: torch {torch.get('torch_version', '')} SDPA" if has_torch else "; no torch rows"
    fig.suptitle(f"wgraph attention on {meta.get('adapter', '?')}\n({meta.get('date', '?')}, {commit}){beside}",
                 fontsize=9)  # two lines: one is wider than a one-panel figure
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def main(argv: list[str]) -> int:
    """`python -m wgraph plot RESULTS.json OUT.png|svg`: plot a saved bench result (no GPU needed)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m wgraph plot", description=__doc__)
    ap.add_argument("results", help="a JSON file written by python -m wgraph bench --json")
    ap.add_argument("out", help="the plot to write: .png or .svg")
    args = ap.parse_args(argv)
    try:
        data = json.loads(Path(args.results).read_text())
    except (ValueError, OSError, RecursionError) as e:   # nested deeper than the json module's recursion limit
        ap.exit(2, f"python -m wgraph plot: {args.results} is not a JSON file: {e}\n")
    try:
        path = plot_result(data, args.out)
    except (ImportError, ValueError, OSError) as e:
        ap.exit(2, f"python -m wgraph plot: {e}\n")
    except (KeyError, TypeError, AttributeError, IndexError) as e:   # JSON, but not what bench --json writes
        ap.exit(2, f"python -m wgraph plot: {args.results} is not a result of python -m wgraph bench --json "
                   f"({type(e).__name__}: {e})\n")
    print(f"wrote {path}")
    return 0
