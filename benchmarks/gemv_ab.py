"""A/B of GEMV configurations on one GPU in one run (run from the project root): features per workgroup
and loads in flight per step, beside the planned kernel, torch and the copy kernel's bandwidth. Experimental
registry entries live in a copy of wgraph/shaders/; `linear` is pointed at each in turn. Writes
$OUT/gemv_ab.json. SMALL=1: a smoke run on lavapipe."""
import json
import os
import shutil
from pathlib import Path

SMALL = os.environ.get("SMALL") == "1"
OUT = Path(os.environ.get("OUT", "/tmp/gemv_ab"))
OUT.mkdir(parents=True, exist_ok=True)
EXP = Path("/tmp/gemv_ab_shaders")
shutil.rmtree(EXP, ignore_errors=True)
shutil.copytree("wgraph/shaders", EXP)
src = (EXP / "linear_gemv.wgsl").read_text()
for unroll in (2, 8):
    (EXP / f"x_gemv_u{unroll}.wgsl").write_text(src.replace("const UNROLL: u32 = 4u;", f"const UNROLL: u32 = {unroll}u;"))
entries, configs = [], []
for wdt, word, widen, mult in (("f16", "vec4<u32>", "widen_f16", 8), ("f32", "vec4<f32>", "widen_f32", 4)):
    for feats, unroll, threads in ((4, 4, 256), (16, 4, 256), (8, 2, 256), (8, 8, 256), (4, 4, 128), (2, 4, 256)):
        name = f"x_gemv_{wdt}_f{feats}_u{unroll}_t{threads}"
        entries.append(f'[variants.{name}]\nop = "linear"\nfile = "{"linear_gemv.wgsl" if unroll == 4 else f"x_gemv_u{unroll}.wgsl"}"\n'
                       f'entry = "main"\nworkgroup_size = [{threads}]\noutput_dtype = "f32"\nweight_dtype = "{wdt}"\n'
                       f'form = "gemv"\nlimits = {{ max_rows = 1, k_multiple = {mult}, features_per_workgroup = {feats} }}\n'
                       f'defines = {{ W_WORD = "{word}", WIDEN = "{widen}" }}\n')
        configs.append((wdt, name))
(EXP / "registry" / "zz_experiments.toml").write_text("\n".join(entries))

import wgraph.kernels.registry as R  # noqa: E402

R.SHADER_DIR = EXP
import wgraph as wg  # noqa: E402
import wgraph.ops.dense as dense  # noqa: E402
from wgraph.bench import gemv, torch_ref  # noqa: E402

dev = wg.default_device()
torch_ok = bool(torch_ref.probe().get("available"))
copy = gemv.copy_bandwidth(dev, 16 << 20 if SMALL else 512 << 20)
print(f"copy kernel: {copy['gbps']:.1f} GB/s", flush=True)
shapes = ([gemv.GemvShape(1, 256, 512, "f16"), gemv.GemvShape(1, 256, 512, "f32")] if SMALL else
          [gemv.GemvShape(1, n, k, dt) for dt in ("f16", "f32") for n, k in ((2048, 8192), (8192, 2048), (128256, 2048))])
planned = dense.plan_linear
RES = {"copy": copy, "rows": []}
for s in shapes:
    for wdt, name in [(s.weight_dtype, None)] + [c for c in configs if c[0] == s.weight_dtype]:
        dense.plan_linear = planned if name is None else (lambda *a, _n=name: dense.LinearPlan(_n, "experiment"))
        rows = gemv.bench_gemv(dev, [s], copy_gbps=copy["gbps"], use_torch=name is None, torch_available=torch_ok)
        r = rows[0]
        r["config"] = name or "planned"
        RES["rows"].append(r)
        print(f"{s.label():40} {r['config']:30} " + (f"{r['gpu_us']:8.1f} us {r['gbps']:8.1f} GB/s {r['fraction_of_copy']:.3f} of copy"
              + (f"  torch {r['torch_gbps']:.1f} GB/s ratio {r['ratio_to_torch']:.3f}" if 'torch_gbps' in r else "")
              + f" err {r['max_rel_err_vs_float64']:.2g}" if r["status"] == "ok" else f"{r['status']} {r['note'][:200]}"), flush=True)
        (OUT / "gemv_ab.json").write_text(json.dumps(RES, indent=1, default=str))
dense.plan_linear = planned
