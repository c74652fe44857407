"""Write the winners of an attention_ab.py run into the registry (run from the project root; no GPU needed):
`python benchmarks/attention_apply.py $OUT/attention_ab.json [--dry-run]`. Prints every change.

- fused decode, per G_TILE (1; 4, which g8 follows for SPLIT_TARGET and DIMS_PER_LANE): the configuration with the
  least replay time over the shapes it ran on (geometric mean of its time / the registry configuration's time,
  so every shape counts alike), among those whose output matched torch (max abs diff < 1e-3). Written into the
  single-sequence entry and its batched twin (both registry files; a test keeps twins equal).
- min_kv_span of the GQA fused entries (g4, g8): the shortest decode length of the run from which the chosen
  fused configuration is no slower than split-K on every GQA shape at that length and above (none: the line
  goes; fused slower everywhere: 1 << 30).
- f32 prefill at D=128: a flash configuration faster than the planned one at every S, as per_row.f32 of
  prefill_flash_d128 (the f16 rows keep theirs).
- varlen: a batched flash configuration faster than the planned one, into batched_flash_d128."""
import json
import math
import re
import sys
from pathlib import Path

res = json.loads(Path(sys.argv[1]).read_text())
DRY = "--dry-run" in sys.argv
REG = Path("wgraph/shaders/registry")
files = {p: p.read_text() for p in (REG / "attention.toml", REG / "attention_batched.toml")}


def block(name: str):
    for path, text in files.items():
        start = text.find(f"[variants.{name}]\n")
        if start >= 0:
            end = text.find("\n[variants.", start + 1)
            return path, start, len(text) if end < 0 else end
    raise KeyError(name)


def edit(name: str, config: dict, min_kv_span="keep", per_row_f32: bool = False):
    """Apply a configuration (WG, DIMS_PER_LANE, defines) to registry variant `name`."""
    path, start, end = block(name)
    text = files[path][start:end]
    before = text
    if per_row_f32:
        defines = {k: str(v) for k, v in config.items() if k != "WG"}
        line = "per_row.f32 = { defines = { " + ", ".join(f'{k} = "{v}"' for k, v in defines.items()) + " }"
        if "WG" in config:
            line += f", workgroup_size = [{config['WG']}, 1, 1]"
        line += " }"
        text = re.sub(r"^per_row\.f32 = .*\n", "", text, flags=re.M).rstrip("\n") + "\n" + line + "\n"
    else:
        for key, value in config.items():
            if key == "WG":
                text = re.sub(r"workgroup_size = \[\d+, 1, 1\]", f"workgroup_size = [{value}, 1, 1]", text)
            elif key == "DIMS_PER_LANE":   # measured on f16 K/V: the f16 and f16kv rows (the f32 row keeps its own)
                def row(m):
                    return m.group(0) if m.group(1) == "f32" else re.sub(r"= \d+", f"= {value}", m.group(0))
                text = re.sub(r"^per_row\.(\w+) = .*$", row, text, flags=re.M)
            else:
                text = re.sub(rf'{key} = "\d+"', f'{key} = "{value}"', text)
    if min_kv_span != "keep":
        text = re.sub(r"^min_kv_span = \d+\n", "", text, flags=re.M)
        if min_kv_span:
            text = text.replace('tier = "fused"\n', f'tier = "fused"\nmin_kv_span = {min_kv_span}\n', 1)
    if text != before:
        files[path] = files[path][:start] + text + files[path][end:]
        print(f"{name}: {config if config else ''}{'' if min_kv_span == 'keep' else f' min_kv_span={min_kv_span}'}")


def ok(r):
    return r and "error" not in r and (r.get("diff") is None or r["diff"] < 1e-3)


def pick(rows, base_label, labels):
    """(label, score): the candidate with the least geometric-mean replay time relative to base_label."""
    scores = {}
    for lab in labels:
        logs = []
        for row in rows:
            got = {r["label"].replace(" (planned)", ""): r for r in row["res"] if "label" in r}
            base, cand = got.get(base_label), got.get(lab)
            if ok(base) and ok(cand):
                logs.append(math.log(cand["replay_us"] / base["replay_us"]))
        if logs:
            scores[lab] = math.exp(sum(logs) / len(logs))
    return min(scores.items(), key=lambda kv: kv[1]) if scores else (base_label, 1.0), scores


fused_cfg = {int(g): c for g, c in res["configs"]["fused"].items()}
chosen = {}
for g in (1, 4):
    rows = [r for r in res.get("decode", []) if r["Hq"] // r["Hkv"] == g]
    base = f"decode_fused_g{g}_f16"
    labels = [base] + [f"x_fused_g{g}_f16_{t}" for t in fused_cfg.get(g, {})]
    (best, score), scores = pick(rows, base, labels)
    print(f"g{g}: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(scores.items(), key=lambda kv: kv[1])))
    chosen[g] = (best, {} if best == base else fused_cfg[g][best.rsplit("_f16_", 1)[1]])
    conf = chosen[g][1]
    for twin in (f"decode_fused_g{g}", f"batched_fused_g{g}"):
        edit(twin, conf)
    if g == 4:
        g8 = {k: v for k, v in conf.items() if k in ("SPLIT_TARGET", "DIMS_PER_LANE", "WG")}
        for twin in ("decode_fused_g8", "batched_fused_g8"):
            edit(twin, g8)

# min_kv_span for GQA: fused (chosen) against split-K per length
label4 = chosen[4][0]
by_len = {}
for row in res.get("decode", []):
    if row["Hq"] // row["Hkv"] != 4:
        continue
    got = {r["label"].replace(" (planned)", ""): r for r in row["res"] if "label" in r}
    f, s = got.get(label4), got.get("decode_splitk_g4_f16")
    if ok(f) and ok(s):
        by_len.setdefault(row["L"], []).append(f["replay_us"] <= s["replay_us"])
if by_len:
    lengths = sorted(by_len)
    span = 1 << 30
    for L in reversed(lengths):
        if all(by_len[L]):
            span = L
        else:
            break
    span = None if span == lengths[0] else span
    print(f"GQA fused vs split-K by kv length: {by_len} -> min_kv_span {span}")
    for twin in ("decode_fused_g4", "decode_fused_g8", "batched_fused_g4", "batched_fused_g8"):
        edit(twin, {}, min_kv_span=span)

# f32 prefill, D=128
rows = res.get("prefill", [])
if rows:
    labels = ["planned"] + [f"x_flash_d128_f32_{t}" for t in res["configs"]["prefill"]]
    (best, score), scores = pick(rows, "planned", labels)
    print("prefill f32 d128: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(scores.items(), key=lambda kv: kv[1])))
    if best != "planned" and score < 0.97:
        edit("prefill_flash_d128", res["configs"]["prefill"][best.rsplit("_f32_", 1)[1]], per_row_f32=True)

# varlen
rows = [r for r in res.get("batched", []) if "flops" in r]
if rows:
    labels = ["planned"] + [f"x_bflash_d128_f16_{t}" for t in res["configs"]["varlen"]]
    (best, score), scores = pick(rows, "planned", labels)
    print("varlen: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(scores.items(), key=lambda kv: kv[1])))
    if best != "planned" and score < 0.97:
        edit("batched_flash_d128", res["configs"]["varlen"][best.rsplit("_f16_", 1)[1]])

if not DRY:
    for path, text in files.items():
        path.write_text(text)
print("dry run: nothing written" if DRY else "written; run the tests (tests/test_attention_batched.py keeps the twins equal)")
