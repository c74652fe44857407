"""Run on a GPU from the project root: the GPU-tuned attention variants of the registry (flash and GEMM-shaped
flash prefill, split-K, fused split-K and one-pass decode, and their batched twins; `python benchmarks/h200_check.py TEXT` keeps the names
containing TEXT, `batched` the batched part only) at real sizes against the float64 numpy reference with
FlashAttention's rule (tests/attention_reference.py, tests/window_reference.py): kv up to 32768, every GQA group
1-8 through the planner, windows, softcap, GPU kv_len, paged caches; batches of 1-64 ragged sequences with GPU
cache_seqlens, paged pools, new rows appended, varlen prefill."""
import sys, time
import numpy as np

sys.path.insert(0, "tests")
import wgraph as wg
from attention_reference import tolerance_check
from window_reference import check as window_check
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
    if k.op != "attention" or k.facts.get("tier") not in ("flash", "gemm", "splitk", "fused", "single"):
        continue
    dt = k.facts["dtype"]
    D = k.limits["max_head_dim"]
    if k.facts["tier"] in ("flash", "gemm"):
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
        case(name, dt, 1, 4096, 4 * g, 4, 64 if k.facts["tier"] in ("fused", "single") else 80, kv_len=4000, page_size=32)
        case(name, dt, 1, 1024, 2 * g, 2, 128, kv_len=777, gpu_len=True)
        # a GPU kv_len far below the capacity: the grid is the capacity's, the chunks past the length return
        case(name, dt, 1, 32768, 4 * g, 4, 64, kv_len=130, gpu_len=True)
if only in ("", "decode", "fused"):
    for group in range(1, 9):  # every GQA group through the planner, f16 and f32, long caches
        for dt in ("f16", "f32"):
            case(None, dt, 1, 16384 + 8 * group, 2 * group, 2, 128, sliding_window=8000 + group)
            case(None, dt, 1, 32768, group, 1, 64, kv_len=30000 + group, gpu_len=True, page_size=64)
if only in ("", "decode", "single"):
    for group in range(1, 9):  # every GQA group through the planner at short spans (the one-pass kernel)
        for dt in ("f16", "f32", "f16kv"):
            case(None, dt, 1, 512, 4 * group, 4, 128, kv_len=130 + group, gpu_len=True)
            case(None, dt, 1, 480, 2 * group, 2, 64, mag=4.0, softcap=30.0, sliding_window=200)
            case(None, dt, 1, 512, group, 1, 256, kv_len=1 + group, page_size=16)


NP = {"f32": (np.float32, np.float32, np.float32), "f16": (np.float16, np.float16, np.float16),
      "f16kv": (np.float32, np.float16, np.float32)}   # q, kv, out


def bcase(variant, dt, lens, hq, hkv, D, n_new=0, page=0, window=(-1, -1), softcap=0.0, mag=1.0, sq=1):
    """attention_kvcache over B ragged sequences (GPU cache_seqlens; a paged pool when page > 0), every sequence
    checked against float64 with FlashAttention's rule."""
    global bad, n
    qt, kt, ot = NP[dt]
    B = len(lens)
    cap = max(lens) + n_new
    cap = -(-cap // max(page, 64)) * max(page, 64)
    kc = (rng.standard_normal((B, cap, hkv, D)) * mag).astype(kt)
    vc = rng.standard_normal((B, cap, hkv, D)).astype(kt)
    q = (rng.standard_normal((B, sq, hq, D)) * mag).astype(qt)
    kn = (rng.standard_normal((B, n_new, hkv, D)) * mag).astype(kt)
    vn = rng.standard_normal((B, n_new, hkv, D)).astype(kt)
    kw = dict(causal=True, window=window, softcap=softcap, return_lse=True, variant=variant)
    if page:
        per = cap // page
        order = rng.permutation(B * per).reshape(B, per).astype(np.uint32)
        pools = []
        for c in (kc, vc):
            pool = np.zeros((B * per * page, hkv, D), c.dtype)
            for b in range(B):
                for i in range(per):
                    pool[order[b, i] * page:(order[b, i] + 1) * page] = c[b, i * page:(i + 1) * page]
            pools.append(dev.tensor(pool))
        K, V = pools
        kw.update(block_table=order, page_size=page)
    else:
        K, V = dev.tensor(kc), dev.tensor(vc)
    if n_new:
        kw.update(k_new=dev.tensor(kn), v_new=dev.tensor(vn))
    out, lse = wg.ops.attention_kvcache(dev.tensor(q), K, V, cache_seqlens=dev.tensor(np.array(lens, np.uint32)), **kw)
    out, lse = out.numpy(), lse.numpy().reshape(hq, B, sq)
    msgs = []
    for b in range(B):
        kb = np.concatenate([kc[b, :lens[b]], kn[b]])
        vb = np.concatenate([vc[b, :lens[b]], vn[b]])
        msg = window_check(out[b], lse[:, b], q[b], kb, vb, out_dtype=ot, causal=True, window=window, softcap=softcap)
        if msg:
            msgs.append(f"sequence {b}: {msg}")
    n += 1
    bad += bool(msgs)
    print(f"{'BAD' if msgs else 'ok '} {variant or 'planned'} kvcache {dt} B={B} lens {lens[:4]}{'...' if B > 4 else ''} "
          f"{hq}/{hkv} D={D} new={n_new} page={page} window={window} softcap={softcap} mag={mag} "
          f"{'; '.join(msgs)[:300]}", flush=True)


def vcase(variant, dt, lens, hq, hkv, D, causal=True, window=(-1, -1)):
    """attention_varlen over ragged packed sequences, each checked against float64."""
    global bad, n
    qt, kt, ot = NP[dt]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.uint32)
    q = rng.standard_normal((cu[-1], hq, D)).astype(qt)
    k = rng.standard_normal((cu[-1], hkv, D)).astype(kt)
    v = rng.standard_normal((cu[-1], hkv, D)).astype(kt)
    out, lse = wg.ops.attention_varlen(dev.tensor(q), dev.tensor(k), dev.tensor(v), cu, dev.tensor(cu),
                                       max_seqlen_q=max(lens), max_seqlen_k=max(lens), causal=causal, window=window,
                                       return_lse=True, variant=variant)
    out, lse = out.numpy(), lse.numpy()
    msgs = []
    for b in range(len(lens)):
        s = slice(cu[b], cu[b + 1])
        msg = window_check(out[s], lse[:, s], q[s], k[s], v[s], out_dtype=ot, causal=causal, window=window)
        if msg:
            msgs.append(f"sequence {b}: {msg}")
    n += 1
    bad += bool(msgs)
    print(f"{'BAD' if msgs else 'ok '} {variant or 'planned'} varlen {dt} lens {list(lens)} {hq}/{hkv} D={D} "
          f"causal={causal} window={window} {'; '.join(msgs)[:300]}", flush=True)


ragged = [32768, 1, 0, 4097, 16384, 777, 30000, 64]
for name, k in registry().items():   # the batched decode kernels forced (`batched`, or a part of their names)
    if k.op != "attention_batched" or k.facts.get("tier") not in ("fused", "splitk", "single") or (
            only not in ("", "batched") and only not in name):
        continue
    dt = k.facts["dtype"]
    g = k.limits.get("max_q_per_kv", 8)
    bcase(name, dt, ragged if dt == "f16" else [l // 4 for l in ragged], 2 * g, 2, 128)
    bcase(name, dt, [9000, 5, 4000], g, 1, 64, n_new=1, page=64, window=(2000, -1), softcap=30.0, mag=4.0)
    bcase(name, dt, [20000], 4 * g, 4, 256 if dt != "f32" or "fused" not in name else 128)
if only in ("", "batched", "fused", "splitk", "flash", "single"):
    for B in (1, 8, 64):   # planned, the bench's shape
        bcase(None, "f16", [4096] * B, 32, 8, 128)
        bcase(None, "f16", [300 - 4 * b for b in range(B)], 32, 8, 64, n_new=1)   # capacity <= 512: one pass
    for B in (1, 8):
        bcase(None, "f16", [16384 - 9 * b for b in range(B)], 32, 8, 128, n_new=1)
    bcase(None, "f16", [1000, 3, 2000], 16, 16, 128, sq=4, n_new=4)          # several queries: the flash kernel
    varlen = (512, 1024, 256, 768, 512, 1024, 128, 896)
    vcase(None, "f16", varlen, 32, 8, 128)
    vcase(None, "f32", varlen, 16, 16, 64, window=(300, -1))
    vcase(None, "f16kv", (1, 0, 2000, 37), 8, 2, 256, causal=False, window=(100, 50))
    vcase("batched_tiled_d256_f32", "f32", (300, 0, 77), 4, 2, 160)
if only in ("", "batched", "gemm") or only.startswith("batched_gemm"):   # the batched GEMM-shaped kernels, forced
    for name, k in registry().items():
        if k.op == "attention_batched" and k.facts.get("tier") == "gemm" and (not only.startswith("batched_gemm")
                                                                             or only in name):
            dt, D = k.facts["dtype"], k.limits["max_head_dim"]
            vcase(name, dt, (512, 1024, 256, 768, 512, 1024, 128, 896), 32, 8, D)
            vcase(name, dt, (1, 0, 700, 37), 8, 2, D - 8 if D > 64 else D, causal=False, window=(100, 50))
            bcase(name, dt, [1000, 3, 2000], 16, 16, D, sq=70, n_new=70, page=64, softcap=30.0, mag=4.0)


def rcase(hidden, hq, hkv, D, wdt, kdt, rows=1, pos=1000, L=2048, gpu_pos=False, bias=False):
    """linear_rope_kv_append (the QKV GEMV with RoPE and the K/V append in its epilogue) at a real size against
    float64: RMSNorm, GEMV (+ bias), rotate-half RoPE at pos + r; the cache rows written, the others unchanged."""
    global bad, n
    from wgraph.ops.linear_rope_kv import plan_linear_rope_kv
    nf = (hq + 2 * hkv) * D
    x = rng.standard_normal((rows, hidden)).astype(np.float32)
    w = (rng.standard_normal((nf, hidden)) / np.sqrt(hidden)).astype(wdt)
    g = (1 + 0.2 * rng.standard_normal(hidden)).astype(np.float32)
    b = rng.standard_normal(nf).astype(np.float32) if bias else None
    cos, sin = wg.ops.rope_tables(L, D)
    old = rng.standard_normal((L, hkv, D)).astype(kdt)
    kc, vc = dev.tensor(old), dev.tensor(old)
    p = dev.tensor(np.array([pos], np.uint32)) if gpu_pos else pos
    q = wg.ops.linear_rope_kv_append(dev.tensor(x), dev.tensor(w), dev.tensor(cos), dev.tensor(sin), (kc, vc), p,
                                     q_heads=hq, b=None if b is None else dev.tensor(b), norm=dev.tensor(g))
    got_q, got_k, got_v = q.numpy(), kc.numpy(), vc.numpy()
    h = x.astype(np.float64)
    h = h / np.sqrt(np.mean(h * h, -1, keepdims=True) + 1e-6) * g
    want = (h @ w.astype(np.float64).T + (0 if b is None else b)).reshape(rows, hq + 2 * hkv, D)
    where = np.arange(pos, pos + rows)
    c, s_ = cos[where][:, None, :].astype(np.float64), sin[where][:, None, :].astype(np.float64)

    def rot(t):
        a, b_ = t[..., :D // 2], t[..., D // 2:]
        return np.concatenate([a * c - b_ * s_, b_ * c + a * s_], -1)

    tol = 2e-3 if kdt == np.float16 else 1e-4   # f16 caches round once; q is f32 (f32 sums of a k-long row)
    errs = (np.abs(got_q - rot(want[:, :hq])).max(), np.abs(got_k[where] - rot(want[:, hq:hq + hkv])).max(),
            np.abs(got_v[where] - want[:, hq + hkv:]).max())
    scale = max(1.0, np.abs(want).max())
    keep = np.setdiff1d(np.arange(L), where)
    ok = errs[0] <= 1e-4 * scale and max(errs[1:]) <= tol * scale and got_k[keep].tobytes() == old[keep].tobytes() \
        and got_v[keep].tobytes() == old[keep].tobytes()
    plan = plan_linear_rope_kv(rows, nf, hidden, np.dtype(wdt).name.replace("float", "f"),
                               np.dtype(kdt).name.replace("float", "f"), dev.caps, norm=True)
    n += 1
    bad += not ok
    print(f"{'ok ' if ok else 'BAD'} linear_rope_kv_append {plan.variant} rows={rows} hidden={hidden} {hq}/{hkv} "
          f"D={D} pos={pos}{' (GPU)' if gpu_pos else ''} bias={bias} err q/k/v {errs[0]:.3g}/{errs[1]:.3g}/"
          f"{errs[2]:.3g} (scale {scale:.3g})", flush=True)


if only in ("", "rope"):
    rcase(2048, 32, 8, 64, np.float16, np.float16)                      # 1B: f16 weights, f16 cache
    rcase(2048, 32, 8, 64, np.float16, np.float16, gpu_pos=True, bias=True)
    rcase(2048, 32, 8, 64, np.float16, np.float16, rows=8, pos=2040)
    rcase(2048, 32, 8, 64, np.float32, np.float32)
    rcase(4096, 32, 8, 128, np.float16, np.float16, L=8192, pos=5000)  # 8B
    rcase(4096, 32, 8, 128, np.float16, np.float16, rows=4, L=8192, pos=5000, gpu_pos=True)
    rcase(4096, 32, 8, 128, np.float32, np.float16, L=8192, pos=5000)


print(f"h200_check: {n} cases, {bad} failed, {time.time() - t0:.0f} s", flush=True)
