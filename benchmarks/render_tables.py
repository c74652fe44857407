"""Markdown tables of a bench JSON's attention rows (prefill TFLOP/s, decode GB/s, beside torch where it ran), for
docs/measurements.md:  python benchmarks/render_tables.py benchmarks/results/NAME.json"""
import json, sys

d = json.load(open(sys.argv[1]))
rows = d["attention"]["rows"]
for phase in ("prefill", "decode"):
    unit = "TFLOP/s" if phase == "prefill" else "GB/s"
    lead = "| S |" if phase == "prefill" else "| kv |"
    print(f"\n{lead} Hq/Hkv | D | dtype | variant | GPU µs | wgraph {unit} | torch {unit} | ratio_to_torch | max abs diff vs torch |")
    print("| --- " * 10 + "|")
    for r in rows:
        if r["phase"] != phase or r.get("status") != "ok":
            continue
        if phase == "prefill":
            us = r["gpu_us"]; mine = r.get("tflops"); tor = r.get("torch_tflops")
        else:
            us = r["gpu_us"]; mine = r["bytes"] / us / 1e3; tor = (r["bytes"] / r["torch_us"] / 1e3) if r.get("torch_us") else None
        f = lambda x, p=3: "—" if x is None else (f"{x:.0f}" if abs(x) >= 1000 else f"{x:.{p}g}")
        print(f"| {r['S'] if phase == 'prefill' else r['L']} | {r['Hq']}/{r['Hkv']} | {r['D']} | {r['dtype']} | {r['variant']} | "
              f"{us:.0f} | {f(mine)} | {f(tor)} | {f(r.get('ratio_to_torch'), 3)} | {f(r.get('max_abs_diff_vs_torch'), 2)} |")
skipped = [r for r in rows if r.get("status") != "ok"]
print(f"\nnot ok: {len(skipped)}", [(r['phase'], r['S'], r['L'], r.get('status')) for r in skipped][:10])
