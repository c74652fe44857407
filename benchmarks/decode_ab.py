"""A/B of decode kernels on one GPU in one run (run from the project root): the planned kernel, the split-K
kernel, configurations of the fused split-K kernel (experimental registry entries in a copy of
wgraph/shaders/) and torch SDPA, on the f16 decode shapes of the targets. GPU time: N back-to-back calls
in one recording, span / N, the best of 2 recordings after a warm-up; per-kernel times from the profile.
Writes $OUT/decode_ab.json. SMALL=1: a smoke run on lavapipe."""
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

SMALL = os.environ.get("SMALL") == "1"
OUT = Path(os.environ.get("OUT", "/tmp/decode_ab"))
OUT.mkdir(parents=True, exist_ok=True)
EXP = Path("/tmp/decode_ab_shaders")
shutil.rmtree(EXP, ignore_errors=True)
shutil.copytree("wgraph/shaders", EXP)
import tomllib  # noqa: E402

from wgraph.kernels.registry import expand_variant  # noqa: E402  (reads no registry yet)

_files = [tomllib.loads(f.read_text()) for f in sorted((EXP / "registry").glob("*.toml"))]
MATRICES = {k: v for f in _files for k, v in f.get("matrix", {}).items()}
FLAT = {n: e for f in _files for name, entry in f.get("variants", {}).items()
        for n, e in expand_variant(name, entry, MATRICES).items()}  # every kernel's entry, expanded


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"


def toml_entry(name: str, entry: dict) -> str:
    return f"[variants.{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in entry.items())


def fused_entry(src: str, name: str, **defines) -> str:
    """The registry entry of kernel `src` renamed, with defines and limits replaced, tier 'exp' (never planned)."""
    e = {**FLAT[src], "tier": "exp", "defines": dict(FLAT[src]["defines"]), "limits": dict(FLAT[src]["limits"])}
    for key, value in defines.items():
        if key == "WG":
            e["workgroup_size"] = [value, 1, 1]
        elif key == "DIMS_PER_LANE":
            e["limits"]["dims_per_lane"] = e["head_dim_multiple"] = value
        else:
            e["defines"][key] = str(value)
            if key == "SPLIT_TARGET":
                g = name.split("_g")[1].split("_")[0]
                e["prepare"] = f"x_prepare_g{g}_t{value}"
    return toml_entry(name, e)


CONFIGS = {  # G_TILE -> [(tag, defines)]; the registry's: g1 U4 DPL16 T1024 WG128, g4 U2 DPL16 T1024 WG128
    1: [("u2", dict(KEYS_PER_THREAD=2)), ("u8", dict(KEYS_PER_THREAD=8)), ("dpl8", dict(DIMS_PER_LANE=8)),
        ("t512", dict(SPLIT_TARGET=512)), ("t256", dict(SPLIT_TARGET=256)), ("wg256", dict(WG=256)),
        ("wg64", dict(WG=64)), ("wg64_t2048", dict(WG=64, SPLIT_TARGET=2048))],
    4: [("u1", dict(KEYS_PER_THREAD=1)), ("u4", dict(KEYS_PER_THREAD=4)), ("dpl8", dict(DIMS_PER_LANE=8)),
        ("t512", dict(SPLIT_TARGET=512)), ("t256", dict(SPLIT_TARGET=256)), ("wg64", dict(WG=64)),
        ("wg64_u4", dict(WG=64, KEYS_PER_THREAD=4)), ("wg64_t2048", dict(WG=64, SPLIT_TARGET=2048))],
}
extra, names = [], {1: [], 4: []}
for g, confs in CONFIGS.items():
    for tag, d in confs:
        name = f"x_fused_g{g}_f16_{tag}"
        extra.append(fused_entry(f"decode_fused_g{g}_f16", name, **d))
        names[g].append(name)
for g in (1, 4, 8):
    for t in (256, 512, 2048):
        extra.append(f'[variants.x_prepare_g{g}_t{t}]\nfile = "attention_decode_splitk_prepare.wgsl"\nentry = "main"\n'
                     f'workgroup_size = [1, 1, 1]\nfeatures = []\noutput_dtype = "u32"\nop = "attention_combine"\n'
                     f'defines = {{ G_TILE = "{g}", CHUNK_STEP = "64", CHUNK_MAX = "16384", SPLIT_TARGET = "{t}" }}\n')
(EXP / "registry" / "zz_experiments.toml").write_text("\n\n".join(extra) + "\n")

import wgraph.kernels.registry as R  # noqa: E402

R.SHADER_DIR = EXP
import wgraph as wg  # noqa: E402
from wgraph.bench import torch_ref  # noqa: E402
from wgraph.bench.grids import Shape, bytes_moved  # noqa: E402

dev = wg.default_device()
print(dev.caps, flush=True)
RES = {"caps": str(dev.caps), "rows": [], "configs": {f"x_fused_g{g}_f16_{tag}": d for g, c in CONFIGS.items()
                                                      for tag, d in c}}


def per_call_us(call, n):
    call()
    dev.sync()
    best = None
    for _ in range(3):
        with dev.record(profile=True) as rec:
            for _ in range(n):
                call()
        prof = rec.profile()
        span = prof.span_us / n
        kern = {r.label.split(".")[-1]: round(r.total_us / n, 1) for r in prof.rows}
        if best is None or span < best[0]:
            best = (span, kern)
    return best


def bench(s: Shape, variants, n):
    rng = np.random.default_rng(0)
    a = (rng.uniform(-1, 1, (1, s.Hq, s.D)).astype(np.float16), rng.uniform(-1, 1, (s.L, s.Hkv, s.D)).astype(np.float16),
         rng.uniform(-1, 1, (s.L, s.Hkv, s.D)).astype(np.float16))
    t = [dev.tensor(x) for x in a]
    row = {"shape": s.label(), "L": s.L, "Hq": s.Hq, "Hkv": s.Hkv, "D": s.D, "bytes": bytes_moved(s), "res": {}}
    try:
        tr = torch_ref.run_sdpa(s, *a, reps=n)
        row["torch_us"] = tr["torch_ms"] * 1e3
        ref = tr["output"]
    except Exception as e:  # noqa: BLE001
        row["torch_us"], ref = None, None
        print("torch:", type(e).__name__, str(e)[:200])
    for var in variants:
        try:
            out = wg.ops.attention(*t, causal=True, variant=var)
            span, kern = per_call_us(lambda: wg.ops.attention(*t, causal=True, variant=var, out=out), n)
            got = out.numpy().astype(np.float32)
            diff = float(np.max(np.abs(got - ref))) if ref is not None else None
            plan = wg.ops.attention_plan(*t, causal=True, variant=var)
            gbps = bytes_moved(s) / span / 1e3
            row["res"][var or "planned"] = dict(variant=plan.variant, span_us=span, kernel_us=kern, gbps=gbps, diff=diff,
                                                workgroups=plan.workgroups)
            tor = (row["torch_us"] / span) if row["torch_us"] else float("nan")
            print(f"{s.label():40} {plan.variant + ('' if var else ' (planned)'):34} {span:8.1f} us {gbps:8.1f} GB/s "
                  f"x_torch {tor:6.3f} diff {diff if diff is None else f'{diff:.2g}'} {kern}", flush=True)
        except Exception as e:  # noqa: BLE001
            print("FAIL", var, type(e).__name__, str(e)[:300], flush=True)
            row["res"][var or "planned"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    if row["torch_us"]:
        print(f"{s.label():40} {'torch':34} {row['torch_us']:8.1f} us {bytes_moved(s) / row['torch_us'] / 1e3:8.1f} GB/s",
              flush=True)
    RES["rows"].append(row)
    (OUT / "decode_ab.json").write_text(json.dumps(RES, indent=1))


lengths = (256, 1024) if SMALL else (1024, 16384, 32768)
heads = ((8, 2), (4, 4)) if SMALL else ((32, 8), (16, 16))
dims = (32, 64) if SMALL else (64, 128)
planned_only = sys.argv[1:] == ["planned"]   # the planned kernel and split-K beside torch, no configurations
if planned_only:
    OUT = OUT / "planned"
    OUT.mkdir(exist_ok=True)
for L in lengths:
    for hq, hkv in heads:
        for D in dims:
            g = hq // hkv
            old = f"decode_splitk_g{g}_f16"
            configs = not planned_only and (D == 128 or L == lengths[-1])
            variants = [None, old] + (names[g] if configs else [])
            if SMALL:
                variants = [None, old, f"decode_fused_g{g}_f16"]
            bench(Shape("decode", 1, L, hq, hkv, D, "f16"), variants, 20 if SMALL else 50)
print("done", flush=True)
