"""The decode bandwidth plot of a `decode_ab.py planned` run: the kernel the planner picks now (split-K for
GQA blocks below its fused kernels' min_kv_span) beside torch. `python benchmarks/plot_decode.py JSON OUT.svg`."""
import json
import sys

from wgraph.bench.plot import decode_bandwidth_plot
from wgraph.scheduler.registry import registry

data = json.load(open(sys.argv[1]))
rows = []
for r in data["rows"]:
    g = r["Hq"] // r["Hkv"]
    fused, split = r["res"]["planned"], r["res"][f"decode_splitk_g{g}_f16"]
    now = split if r["L"] < int(registry()[fused["variant"]].facts.get("min_kv_span", 0)) else fused
    rows.append({"L": r["L"], "Hq": r["Hq"], "Hkv": r["Hkv"], "D": r["D"], "dtype": "f16", "gbps": now["gbps"],
                 "torch_gbps": r["bytes"] / r["torch_us"] / 1e3})
decode_bandwidth_plot(rows, sys.argv[2], "f16 decode on NVIDIA H200 (wgraph planned kernel vs torch SDPA)")
