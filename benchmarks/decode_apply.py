"""Pick the fastest fused-decode configuration of a decode_ab.py run and write it into
wgraph/shaders/registry/attention.toml (run from the project root): per G_TILE (1, 4; g8 takes g4's split target and
workgroup size), the configuration with the least GPU time summed over the shapes the configurations ran on,
among those whose output matched torch (max abs diff < 1e-3). Prints the choice."""
import json
import re
import sys
from pathlib import Path

res = json.loads(Path(sys.argv[1]).read_text())
configs = res["configs"]
reg_path = Path("wgraph/shaders/registry/attention.toml")
reg = reg_path.read_text()


def score(g: int, name: str | None):
    total = 0.0
    for row in res["rows"]:
        if row["Hq"] // row["Hkv"] != g or not any(k.startswith("x_") for k in row["res"]):
            continue
        r = row["res"].get(name or "planned")
        if name is None and r and r.get("variant") != f"decode_fused_g{g}_f16":
            return None
        if not r or "span_us" not in r or r["diff"] is None or r["diff"] > 1e-3:
            return None
        total += r["span_us"]
    return total


def set_entry(name: str, defines: dict):
    global reg
    start = reg.index(f"[variants.{name}]")
    end = reg.find("\n[variants.", start + 1)
    end = len(reg) if end < 0 else end
    text = reg[start:end]
    for key, value in defines.items():
        if key == "WG":
            text = re.sub(r"workgroup_size = \[\d+, 1, 1\]", f"workgroup_size = [{value}, 1, 1]", text)
        elif key == "DIMS_PER_LANE":  # per_row lines: an f32 row's lane holds half as many dims
            def row_dpl(m):
                v = int(value * (0.5 if m.group(1) == "f32" else 1.0))
                return re.sub(r"= \d+", f"= {v}", m.group(0))
            text = re.sub(r"^per_row\.(\w+) = .*$", row_dpl, text, flags=re.M)
        else:
            text = re.sub(rf'{key} = "\d+"', f'{key} = "{value}"', text)
    reg = reg[:start] + text + reg[end:]


for g in (1, 4):
    cands = [(score(g, None), "registry", {})] + [(score(g, n), n, d) for n, d in configs.items() if f"_g{g}_" in n]
    cands = [c for c in cands if c[0] is not None]
    best = min(cands, key=lambda c: c[0])
    print(f"g{g}: " + ", ".join(f"{n} {s:.1f}" for s, n, _ in sorted(cands, key=lambda c: c[0])), flush=True)
    old = sum(r["res"].get(f"decode_splitk_g{g}_f16", {}).get("span_us", float("nan")) for r in res["rows"]
              if r["Hq"] // r["Hkv"] == g and any(k.startswith("x_") for k in r["res"]))
    print(f"g{g}: chose {best[1]} {best[2]}; split-K on the same shapes: {old:.1f}", flush=True)
    set_entry(f"decode_fused_g{g}", best[2])
    shared = {k: v for k, v in best[2].items() if k in ("SPLIT_TARGET",)}
    set_entry(f"decode_fused_prepare_g{g}", shared)
    if g == 4:  # g8 follows g4's split and workgroup size
        g8 = {k: v for k, v in best[2].items() if k in ("SPLIT_TARGET", "WG")}
        set_entry("decode_fused_g8", g8)
        set_entry("decode_fused_prepare_g8", shared)
reg_path.write_text(reg)
