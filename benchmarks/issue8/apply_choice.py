"""Issue 8 tooling: from a sweep.json, pick the fastest correct configuration of each kernel class and write
its defines into wgraph/shaders/registry.toml. Correct = max |diff| vs torch SDPA under the dtype's bound.
Usage: python benchmarks/issue8/apply_choice.py SWEEP_JSON [--dry-run]"""
import json, re, sys
from collections import defaultdict
from pathlib import Path

sweep = json.load(open(sys.argv[1]))
REG = Path("wgraph/shaders/registry.toml")
BOUND = {"f32": 1e-5, "f16": 4e-3, "f16kv": 1e-4}
score = defaultdict(lambda: defaultdict(float))   # class -> config -> summed span over its shapes
seen = defaultdict(lambda: defaultdict(int))
shapes = defaultdict(int)
for row in sweep["rows"]:
    for var, r in row["res"].items():
        if not var.startswith("x_") or "error" in r or "_nop" in var or "_noscore" in var:
            continue
        if r["diff"] is None or not r["diff"] < BOUND[row["dtype"]]:
            print("rejected (wrong):", var, row["shape"], r["diff"])
            continue
        m = re.match(r"x_flash_d(\d+)_(\w+?)_bm(\d+)_r(\d+)_t(\d+)_n(\d+)(_pk|_f32pv)?$", var)
        if m:
            d, dt, bm, rr, tpq, tn, pk = m.groups()
            packed = (dt == "f16") if pk is None else (pk == "_pk")
            key, cfg = f"flash_d{d}_{dt}", (int(bm), int(rr), int(tpq), int(tn), packed)
        else:
            m = re.match(r"x_splitk_g(\d+)_(\w+?)_u(\d+)_t(\d+)_c(\d+)_s(\d+)_w(\d+)$", var)
            if not m:
                continue
            g, dt, u, t, c, s, w = m.groups()
            key, cfg = f"splitk_g{g}_{dt}", (int(u), int(t), int(c), int(s), int(w))
        score[key][cfg] += r["span_us"] * (4.0 if row["L"] >= 32768 and row["S"] == 1 else 1.0)
        seen[key][cfg] += 1
        shapes[(key, row["shape"])] = 1

choice = {}
for key, cfgs in score.items():
    n = max(seen[key].values())
    full = {c: v for c, v in cfgs.items() if seen[key][c] == n}   # configs measured on every shape of the class
    best = min(full, key=full.get)
    choice[key] = best
    print(f"{key}: {best}  ({full[best]:.0f} weighted us; {len(full)} configs on {n} shapes)")


def set_defines(name: str, **values):
    text = REG.read_text()
    start = text.index(f"[variants.{name}]")
    end = text.find("\n[variants.", start + 1)
    end = len(text) if end < 0 else end
    block = text[start:end]
    for k, v in values.items():
        block, n = re.subn(rf'\b{k} = "[^"]*"', f'{k} = "{v}"', block)
        assert n == 1, (name, k)
    REG.write_text(text[:start] + block + text[end:])


def set_wg(name: str, wg: int):
    text = REG.read_text()
    start = text.index(f"[variants.{name}]")
    end = text.find("\n[variants.", start + 1)
    block = re.sub(r"workgroup_size = \[\d+, 1, 1\]", f"workgroup_size = [{wg}, 1, 1]", text[start:end])
    REG.write_text(text[:start] + block + text[end:])


if "--dry-run" not in sys.argv:
    for d in (64, 128, 256):
        for dt in ("f32", "f16", "f16kv"):
            src = choice.get(f"flash_d{d}_{dt}") or choice.get(f"flash_d{d}_f32")   # f16kv does f32 math: as f32
            if src is None:
                continue
            bm, r, tpq, tn, packed = src
            packed = packed and dt == "f16"
            set_defines(f"prefill_flash_d{d}_{dt}", BLOCK_M=bm, ROWS_PER_THREAD=r, THREADS_PER_QUERY=tpq, TILE_N=tn,
                        MATH_T="f16" if packed else "f32", PACKED_F16="true" if packed else "false")
            set_wg(f"prefill_flash_d{d}_{dt}", bm // r * tpq)
    for g in (1, 4, 8):
        src = choice.get(f"splitk_g{g}_f16")
        if src is None:
            continue
        u, t, c, s, w = src
        for dt in ("f32", "f16", "f16kv"):
            set_defines(f"decode_splitk_g{g}_{dt}", KEYS_PER_THREAD=u, SPLIT_TARGET=t, CHUNK_MAX=c)
            set_wg(f"decode_splitk_g{g}_{dt}", w)
        set_defines(f"decode_splitk_prepare_g{g}", SPLIT_TARGET=t, CHUNK_MAX=c)
    json.dump({k: list(v) for k, v in choice.items()}, open(Path(sys.argv[1]).parent / "choice.json", "w"), indent=1)
    print("registry updated")
