"""Run on a GPU from the project root: the GPU-tuned attention variants of the registry (flash prefill, split-K
and fused split-K decode; `python benchmarks/h200_check.py TEXT` keeps the names containing TEXT) at real sizes
against the float64 numpy reference with FlashAttention's rule (tests/attention_reference.py): kv up to 32768,
every GQA group 1-8 through the planner, windows, softcap, GPU kv_len, paged caches."""
import sys, time
import numpy as np

sys.path.insert(0, "tests")
import wgraph as wg
from attention_reference import tolerance_check
from wgraph.kernels.registry import registry

dev = wg.default_device()
rng = np.random.default_rng(7)
bad = n = 0
t0 = time.time()


def case(variant, dt, S, L, hq, hkv, D, mag=1.0, **opt):
    global bad, n
    opt.setdefault("causal", True)
    qdt = np.float16 if dt == "f16" else np.float32
    kdt = np.float32 if dt == "f32" else np.float16
    rows = opt.pop("rows", L)
    q = (rng.standard_normal((S, hq, D)) * mag).astype(qdt)
    k = (rng.standard_normal((rows, hkv, D)) * mag).astype(kdt)
    v = rng.standard_normal((rows, hkv, D)).astype(kdt)
    kw, ref = dict(opt), dict(opt)
    if opt.pop("gpu_len", False):
        kw.pop("gpu_len"); ref.pop("gpu_len")
        kw["kv_len"] = dev.tensor(np.array([opt["kv_len"]], np.uint32))
    if "page_size" in opt:
        table = rng.permutation(rows // opt["page_size"]).astype(np.uint32)
        kw.update(kv_layout="paged", page_table=dev.tensor(table)); ref.update(kv_layout="paged", page_table=table)
    tq, tk, tv = dev.tensor(q), dev.tensor(k), dev.tensor(v)
    got = wg.ops.attention(tq, tk, tv, variant=variant, **kw).numpy()
    planned = "" if variant else "planned "
    variant = wg.ops.attention_plan(tq, tk, tv, variant=variant, **kw).variant
    ok, err, base, bound = tolerance_check(got, q, k, v, out_dtype=np.float16 if dt == "f16" else np.float32, **ref)
    n += 1
    bad += not ok
    print(f"{'ok ' if ok else 'BAD'} {planned}{variant} S={S} L={L} {hq}/{hkv} D={D} mag={mag} {opt} err {err:.3g} "
          f"bound {bound:.3g}", flush=True)


only = sys.argv[1] if len(sys.argv) > 1 else ""
for name, k in registry().items():
    if only not in name:
        continue
    if k.op != "attention" or k.facts.get("tier") not in ("flash", "splitk", "fused"):
        continue
    dt = k.facts["dtype"]
    D = k.limits["max_head_dim"]
    if k.facts["tier"] == "flash":
        case(name, dt, 1024, 1024, 8, 2, D)
        case(name, dt, 700, 700, 4, 4, D - 8 if D > 64 else D, mag=4.0)
        case(name, dt, 300, 2000, 4, 1, D, softcap=30.0, sliding_window=512)
        case(name, dt, 256, 1536, 8, 2, D, kv_len=1400, gpu_len=True, page_size=16)
        case(name, dt, 500, 500, 2, 2, D, causal=False)
    else:
        g = k.limits.get("max_q_per_kv", 16)
        hkv = 2 if g > 1 else 4
        case(name, dt, 1, 32768, hkv * g, hkv, 128)
        case(name, dt, 1, 9000, 2 * g, 2, 64, mag=4.0, softcap=30.0)
        case(name, dt, 1, 20000, g, 1, 256, kv_len=17001, gpu_len=True, sliding_window=4096)
        # the fused kernels split a key row over a power-of-two number of lanes: head_dim 80 is not theirs
        case(name, dt, 1, 4096, 4 * g, 4, 64 if k.facts["tier"] == "fused" else 80, kv_len=4000, page_size=32)
        case(name, dt, 1, 1024, 2 * g, 2, 128, kv_len=777, gpu_len=True)
if only in ("", "decode", "fused"):
    for group in range(1, 9):  # every GQA group through the planner, f16 and f32, long caches
        for dt in ("f16", "f32"):
            case(None, dt, 1, 16384 + 8 * group, 2 * group, 2, 128, sliding_window=8000 + group)
            case(None, dt, 1, 32768, group, 1, 64, kv_len=30000 + group, gpu_len=True, page_size=64)
print(f"h200_check: {n} cases, {bad} failed, {time.time() - t0:.0f} s", flush=True)
