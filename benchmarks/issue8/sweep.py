"""H200 sweep for issue 8 (run on the GPU machine from the project root): flash prefill and split-K decode configurations
beside the previous kernels (from git HEAD, copied into benchmarks/issue8/) and torch SDPA in the same run.
Timing: N back-to-back calls in one recording, GPU span (first dispatch start to last end) / N, as torch's
CUDA events time N back-to-back calls. Correctness at real shapes against torch float64.
SMALL=1 shrinks every shape for a smoke run on lavapipe."""
import json, os, re, shutil, sys, time
from pathlib import Path

import numpy as np

SMALL = os.environ.get("SMALL") == "1"
OUT = Path(os.environ.get("OUT", "/tmp/sweep_out"))
OUT.mkdir(parents=True, exist_ok=True)
EXP = Path("/tmp/exp_shaders")
shutil.rmtree(EXP, ignore_errors=True)
shutil.copytree("wgraph/shaders", EXP)
for f in ("flash_old", "old_splitk", "old_splitk_combine", "old_splitk_common", "old_splitk_prepare", "splitk_v2"):
    shutil.copy(f"benchmarks/issue8/{f}.wgsl", EXP / f"{f}.wgsl")
reg = [(EXP / "registry.toml").read_text()]


def entry(name, file, wg, feats, out_dt, defines, limits, op="attention", **facts):
    d = ", ".join(f'{k} = "{v}"' for k, v in defines.items())
    lim = ", ".join(f"{k} = {v}" for k, v in limits.items())
    f = "\n".join(f"{k} = {json.dumps(v)}" for k, v in facts.items())
    reg.append(f'[variants.{name}]\nfile = "{file}"\nentry = "main"\nworkgroup_size = [{wg}, 1, 1]\n'
               f"features = {json.dumps(feats)}\noutput_dtype = \"{out_dt}\"\nop = \"{op}\"\n"
               f"defines = {{ {d} }}\nlimits = {{ {lim} }}\n{f}\n")


# old flash (HEAD) for A/B
old = (Path("benchmarks/issue8/flash_old_registry.toml").read_text().replace('"attention_prefill_flash.wgsl"', '"flash_old.wgsl"')
       .replace("[variants.prefill_flash_", "[variants.old_flash_"))
reg.append(old)
# old split-K decode (HEAD), f16 and f32; old_splitk_g4_f16: the same kernel serving 4 q heads per workgroup
for g in (1, 4):
    sfx = "" if g == 1 else f"_g{g}"
    for dt, qt, kvec, kdiv, koct, vvec, vquad, en, feats in (
            ("f16", "f16", "vec4<u32>", "8", "unpack_oct(k[kb + o])", "vec2<u32>", "unpack_quad(v[vb])", "enable f16;", ["shader-f16", "subgroup"]),
            ("f32", "f32", "vec4<f32>", "4", "mat2x4<f32>(k[kb + 2u * o], k[kb + 2u * o + 1u])", "vec4<f32>", "v[vb]", "", ["subgroup"])):
        entry(f"old_splitk{sfx}_{dt}", "old_splitk.wgsl", 128, feats, dt,
              dict(Q_T=qt, ENABLE_F16=en, K_VEC=kvec, K_DIV=kdiv, K_OCT=koct, V_VEC=vvec, V_QUAD=vquad, TILE_KEYS=128,
                   G_TILE=g, SPLIT_TARGET=1024, CHUNK_STEP=128, CHUNK_MAX=1 << 20), {"max_head_dim": 256}, phase="decode", dtype=dt, tier="exp",
              grid="splitk", head_dim_multiple=8, prepare=f"old_splitk_prepare{sfx}", combine=f"old_splitk_combine{sfx}_{dt}")
        entry(f"old_splitk_combine{sfx}_{dt}", "old_splitk_combine.wgsl", 128, feats[:-1], dt,
              dict(OUT_T=dt, ENABLE_F16=en, TILE_KEYS=128, G_TILE=g, SPLIT_TARGET=1024, CHUNK_STEP=128), {"max_head_dim": 256},
              op="attention_combine")
    entry(f"old_splitk_prepare{sfx}", "old_splitk_prepare.wgsl", 1, [], "u32", dict(TILE_KEYS=128, G_TILE=g, SPLIT_TARGET=1024, CHUNK_STEP=128, CHUNK_MAX=1 << 20),
          {}, op="attention_combine")

FLASH = {}  # name -> (D class, dtype)
def flash(D, dt, bm, r, tpq, tn, packed=None):
    packed = (dt == "f16") if packed is None else packed
    name = f"x_flash_d{D}_{dt}_bm{bm}_r{r}_t{tpq}_n{tn}" + ("" if packed == (dt == "f16") else ("_pk" if packed else "_f32pv"))
    qt = "f16" if dt == "f16" else "f32"
    kt = "f32" if dt == "f32" else "f16"
    entry(name, "attention_prefill_flash.wgsl", bm // r * tpq, ["subgroup"] + (["shader-f16"] if dt != "f32" else []), qt,
          dict(Q_T=qt, KV_T=kt, OUT_T=qt, ENABLE_F16="" if dt == "f32" else "enable f16;",
               MATH_T="f16" if packed else "f32", PACKED_F16="true" if packed else "false",
               BLOCK_M=bm, ROWS_PER_THREAD=r, THREADS_PER_QUERY=tpq, TILE_N=tn),
          {"max_head_dim": D}, phase="prefill", dtype=dt, tier="exp", grid="block", head_dim_multiple=4)
    FLASH[name] = (D, dt)
    return name

D128 = [(64, 1, 2, 16), (64, 1, 2, 8), (64, 1, 1, 16), (32, 1, 1, 16), (128, 1, 2, 16), (32, 1, 2, 16),
        (64, 1, 1, 8), (32, 1, 2, 8), (64, 2, 4, 8)]
D64 = [(64, 1, 1, 16), (128, 1, 1, 16), (64, 1, 1, 8), (128, 2, 1, 16), (32, 1, 1, 16), (64, 1, 1, 32), (64, 2, 2, 8)]
D256 = [(32, 1, 4, 8), (32, 1, 2, 8), (64, 1, 4, 8), (32, 1, 4, 16), (16, 1, 2, 8)]
pre_f32_128 = [flash(128, "f32", *c) for c in D128]
pre_f32_64 = [flash(64, "f32", *c) for c in D64]
pre_f32_256 = [flash(256, "f32", *c) for c in D256]
pre_f16_128 = [flash(128, "f16", *c) for c in D128[:5]] + [flash(128, "f16", *c, packed=False) for c in D128[:3]]
pre_f16_64 = [flash(64, "f16", *c) for c in D64[:3]] + [flash(64, "f16", *D64[0], packed=False)]

F16_PIECE = ("return select(vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)), "
             "vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)), e == 0u);")
main_src = (EXP / "attention_decode_splitk.wgsl").read_text()
# leave-one-phase-out copies (timing only: their outputs are wrong)
(EXP / "x_nopv.wgsl").write_text(main_src.replace("    if (in_slot) {\n        for (var kb", "    if (in_slot && n == 0xffffffffu) {\n        for (var kb", 1))
(EXP / "x_noscore.wgsl").write_text(main_src.replace("for (var kb: u32 = 0u; kb < n; kb += KS * U) {", "for (var kb: u32 = 0u; kb < n && n == 0xffffffffu; kb += KS * U) {", 1))
assert (EXP / "x_nopv.wgsl").read_text() != main_src and (EXP / "x_noscore.wgsl").read_text() != main_src
def splitk(dt, g, u, target, cmax, step=64, wg=128, file="attention_decode_splitk.wgsl", tag=""):
    name = f"x_splitk_g{g}_{dt}_u{u}_t{target}_c{cmax}_s{step}_w{wg}{tag}"
    qt = "f16" if dt == "f16" else "f32"
    entry(name, file, wg, [] if dt == "f32" else ["shader-f16"], qt,
          dict(Q_T=qt, ENABLE_F16="enable f16;" if dt == "f16" else "", PIECE_VEC4S=1 if dt == "f32" else 2,
               PIECE_BODY="return bitcast<vec4<f32>>(w);" if dt == "f32" else F16_PIECE, KEYS_PER_THREAD=u,
               G_TILE=g, CHUNK_STEP=step, CHUNK_MAX=cmax, SPLIT_TARGET=target),
          {"max_head_dim": 256}, phase="decode", dtype=dt, tier="exp", grid="splitk", head_dim_multiple=8,
          prepare=f"{name}_prep", combine=f"decode_splitk_combine_{qt}")
    entry(f"{name}_prep", "attention_decode_splitk_prepare.wgsl", 1, [], "u32",
          dict(G_TILE=g, CHUNK_STEP=step, CHUNK_MAX=cmax, SPLIT_TARGET=target), {}, op="attention_combine")
    return name

assert "CHUNK_STEP = \"64\"" in (EXP / "registry.toml").read_text()   # the experiments below share the combine's step
dec_g4 = [splitk("f16", 4, 4, 1024, 512, file="x_nopv.wgsl", tag="_nopv"), splitk("f16", 4, 4, 1024, 512, file="x_noscore.wgsl", tag="_noscore"),
          splitk("f16", 4, 8, 1024, 512), splitk("f16", 4, 4, 512, 512), splitk("f16", 4, 4, 2048, 512),
          splitk("f16", 4, 2, 1024, 512), splitk("f16", 8, 2, 1024, 256), splitk("f16", 4, 4, 1024, 512, wg=256)]
dec_g1 = [splitk("f16", 1, 4, 1024, 1024, file="x_nopv.wgsl", tag="_nopv"), splitk("f16", 1, 4, 1024, 1024, file="x_noscore.wgsl", tag="_noscore"),
          splitk("f16", 1, 8, 1024, 1024), splitk("f16", 1, 4, 2048, 1024), splitk("f16", 1, 4, 512, 1024),
          splitk("f16", 1, 8, 1024, 1024, wg=256), splitk("f16", 1, 16, 1024, 1024)]
dec_f32 = [splitk("f32", 4, 2, 1024, 512), splitk("f32", 4, 8, 1024, 512)]

PHASE2 = os.environ.get("PHASE2") == "1"
if PHASE2:  # run 2: the software-pipelined kernel (registry) against the unpipelined one (splitk_v2.wgsl)
    p2_g4 = [splitk("f16", 4, 4, 512, 512, file="splitk_v2.wgsl", tag="_v2"), splitk("f16", 4, 2, 512, 512),
             splitk("f16", 4, 8, 512, 512), splitk("f16", 4, 4, 256, 512), splitk("f16", 4, 4, 1024, 512)]
    p2_g1 = [splitk("f16", 1, 4, 512, 1024, file="splitk_v2.wgsl", tag="_v2"), splitk("f16", 1, 2, 512, 1024),
             splitk("f16", 1, 8, 512, 1024), splitk("f16", 1, 4, 256, 1024), splitk("f16", 1, 4, 1024, 1024)]
    p2_f32 = [splitk("f32", 4, 4, 512, 512, file="splitk_v2.wgsl", tag="_v2"), splitk("f32", 4, 2, 512, 512)]
    p2_g8 = [splitk("f16", 8, 2, 1024, 256, file="splitk_v2.wgsl", tag="_v2"), splitk("f16", 8, 4, 1024, 256),
             splitk("f16", 8, 2, 512, 256)]
if SMALL:  # smoke run: one of each
    pre_f32_128, pre_f32_64, pre_f16_128, pre_f16_64, pre_f32_256 = pre_f32_128[:1], [], pre_f16_128[:1], [], []
    dec_g4, dec_g1, dec_f32 = dec_g4[:1], dec_g1[:1], dec_f32[:1]
(EXP / "registry.toml").write_text("\n\n".join(reg))
import wgraph.scheduler.registry as R
R.SHADER_DIR = EXP
import wgraph as wg
from wgraph.bench import torch_ref
from wgraph.bench.grids import Shape, bytes_moved, flops

dev = wg.default_device()
print(dev.caps, flush=True)
RES = {"caps": str(dev.caps), "rows": [], "checks": []}
T0 = time.time()


def per_call_us(call, n):
    call()
    dev.sync()
    best = None
    for _ in range(2):
        with dev.record(profile=True) as rec:
            for _ in range(n):
                call()
        prof = rec.profile()
        span = prof.span_us / n
        kern = {r.label.split(".")[-1]: round(r.total_us / n, 1) for r in prof.rows}
        if best is None or span < best[0]:
            best = (span, kern)
    return best


def scale(x):
    return max(1, x // 16) if SMALL else x


def arrays(s: Shape, rng):
    qd = np.float16 if s.dtype == "f16" else np.float32
    kd = np.float32 if s.dtype == "f32" else np.float16
    return (rng.uniform(-1, 1, (s.S, s.Hq, s.D)).astype(qd), rng.uniform(-1, 1, (s.L, s.Hkv, s.D)).astype(kd),
            rng.uniform(-1, 1, (s.L, s.Hkv, s.D)).astype(kd))


def bench(s: Shape, variants, n):
    rng = np.random.default_rng(0)
    a = arrays(s, rng)
    t = [dev.tensor(x) for x in a]
    row = {"shape": s.label(), "S": s.S, "L": s.L, "Hq": s.Hq, "Hkv": s.Hkv, "D": s.D, "dtype": s.dtype, "res": {}}
    try:
        tr = torch_ref.run_sdpa(s, *a, reps=n)
        row["torch_us"] = tr["torch_ms"] * 1e3
        ref = tr["output"]
    except Exception as e:  # noqa: BLE001
        row["torch_us"] = None
        ref = None
        print("torch:", type(e).__name__, str(e)[:200])
    for var in variants:
        if time.time() - T0 > BUDGET:
            print("budget spent; skipping", var)
            continue
        try:
            out = wg.ops.attention(*t, causal=True, variant=var)
            t1 = time.time()
            span, kern = per_call_us(lambda: wg.ops.attention(*t, causal=True, variant=var, out=out), n)
            diff = float(np.max(np.abs(out.numpy().astype(np.float32) - ref))) if ref is not None else None
            plan = wg.ops.attention_plan(*t, causal=True, variant=var)
            rate = (flops(s) / span / 1e6) if s.phase == "prefill" else (bytes_moved(s) / span / 1e3)
            row["res"][var] = dict(span_us=span, kernel_us=kern, rate=rate, diff=diff, wg=plan.workgroups)
            tor = (row["torch_us"] / span) if row["torch_us"] else float("nan")
            unit = "TFLOP/s" if s.phase == "prefill" else "GB/s"
            print(f"{s.label():44} {var:44} {span:9.1f} us {rate:8.2f} {unit} x_torch {tor:6.3f} diff {diff if diff is None else f'{diff:.3g}'} "
                  f"{kern} ({time.time() - t1:.1f}s)", flush=True)
        except Exception as e:  # noqa: BLE001
            print("FAIL", var, type(e).__name__, str(e)[:300], flush=True)
            row["res"][var] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    if row["torch_us"]:
        rate = (flops(s) / row["torch_us"] / 1e6) if s.phase == "prefill" else (bytes_moved(s) / row["torch_us"] / 1e3)
        print(f"{s.label():44} {'torch':44} {row['torch_us']:9.1f} us {rate:8.2f}", flush=True)
    RES["rows"].append(row)
    json.dump(RES, open(OUT / "sweep.json", "w"), indent=1)


BUDGET = float(os.environ.get("BUDGET", "330"))
S = scale(4096)
if PHASE2:
    for L in (32768, 1024):
        bench(Shape("decode", 1, scale(L), 32, 8, 128, "f16"), ["decode_splitk_g4_f16"] + p2_g4, 40)
        bench(Shape("decode", 1, scale(L), 16, 16, 128, "f16"), ["decode_splitk_g1_f16"] + p2_g1, 40)
    bench(Shape("decode", 1, scale(32768), 32, 8, 128, "f32"), ["decode_splitk_g4_f32"] + p2_f32, 40)
    bench(Shape("decode", 1, scale(32768), 64, 8, 128, "f16"), ["decode_splitk_g8_f16"] + p2_g8, 40)
else:
    for L in (32768, 1024):
        Ls = scale(L)
        bench(Shape("decode", 1, Ls, 32, 8, 128, "f16"), ["decode_splitk_g4_f16", "old_splitk_f16", "old_splitk_g4_f16"] + dec_g4, 40)
        bench(Shape("decode", 1, Ls, 16, 16, 128, "f16"), ["decode_splitk_g1_f16", "old_splitk_f16"] + dec_g1, 40)
    bench(Shape("decode", 1, scale(32768), 32, 8, 128, "f32"), ["decode_splitk_g4_f32", "old_splitk_f32"] + dec_f32, 40)
    bench(Shape("decode", 1, scale(32768), 32, 8, 64, "f16"), ["decode_splitk_g4_f16"], 40)
    bench(Shape("prefill", S, S, 16, 16, 128, "f32"), pre_f32_128, 4)
    bench(Shape("prefill", S, S, 32, 8, 128, "f32"), pre_f32_128[:5], 4)
    bench(Shape("prefill", S, S, 16, 16, 128, "f16"), pre_f16_128, 4)
    bench(Shape("prefill", S, S, 16, 16, 64, "f32"), pre_f32_64, 4)
    bench(Shape("prefill", S, S, 16, 16, 64, "f16"), pre_f16_64, 4)
    bench(Shape("prefill", S // 2, S // 2, 16, 16, 256, "f32"), pre_f32_256, 4)
print(f"sweep done in {time.time() - T0:.0f} s", flush=True)
