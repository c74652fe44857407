"""Decode bandwidth against kv length, wgraph beside torch, as an SVG or PNG (matplotlib, an optional extra).
`python -m wgraph.bench.plot BENCH_JSON OUT.svg` plots the decode rows of a `python -m wgraph bench --json`."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def decode_bandwidth_plot(rows: list[dict], path, title: str = "decode bandwidth") -> Path:
    """One line per (heads, head_dim, dtype): wgraph GB/s (solid) and torch GB/s (dashed) against kv length.
    `rows`: the bench's attention rows (decode rows with `gbps`, optionally `torch_gbps`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("phase", "decode") == "decode" and r.get("status", "ok") == "ok" and r.get("gbps"):
            series.setdefault((r["Hq"], r["Hkv"], r["D"], r["dtype"]), []).append(r)
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (key, rs) in enumerate(sorted(series.items())):
        rs = sorted(rs, key=lambda r: r["L"])
        label = f"{key[0]}/{key[1]} D={key[2]} {key[3]}"
        color = f"C{i % 10}"
        ax.plot([r["L"] for r in rs], [r["gbps"] for r in rs], "o-", color=color, label=f"wgraph {label}")
        if all(r.get("torch_gbps") for r in rs):
            ax.plot([r["L"] for r in rs], [r["torch_gbps"] for r in rs], "x--", color=color, label=f"torch {label}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("kv length")
    ax.set_ylabel("GB/s (K + V + q + out bytes / GPU time)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    path = Path(path)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m wgraph.bench.plot BENCH_JSON OUT.svg", file=sys.stderr)
        return 2
    data = json.loads(Path(argv[0]).read_text())
    decode_bandwidth_plot(data["attention"]["rows"], argv[1], title=f"decode on {data['meta']['adapter']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
