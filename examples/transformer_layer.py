"""One transformer attention layer as one graph: rmsnorm -> QKV projection (f16 weights) -> RoPE ->
kv_append into a paged cache -> attention (GQA) -> output projection -> residual.

Runs it op by op (immediate: the 11 ops wait in the pending list and go in one submit, as up to 32 would) and as
one compiled program (one submit), prints the plan, the submit counts, the median times and the two results'
difference, and checks both against float64 numpy."""

import time

import numpy as np

import wgraph as wg

S, DM, HQ, HKV, D = 8, 64, 4, 2, 16          # tokens, model width, query heads, kv heads (GQA 2:1), head dim
PAGE, PAGES = 8, 4                            # paged cache: 4 pages of 8 rows, in a scrambled order
POS = 5                                       # the first token's position (5 earlier rows are in the cache)


def layer(x, pos, kv_len, cache, table, w, cos, sin):
    """The same code on Tensors (immediate) or graph Values (a node per op)."""
    h = wg.ops.rmsnorm(x, w["norm"])
    q = wg.ops.reshape(wg.ops.linear(h, w["wq"]), S, HQ, D)
    k = wg.ops.reshape(wg.ops.linear(h, w["wk"]), S, HKV, D)
    v = wg.ops.reshape(wg.ops.linear(h, w["wv"]), S, HKV, D)
    q, k = wg.ops.rope(q, cos, sin, pos=pos), wg.ops.rope(k, cos, sin, pos=pos)
    wg.ops.kv_append(cache, k, v, pos, layout="paged", page_table=table, page_size=PAGE)
    o = wg.ops.attention(q, cache[0], cache[1], causal=True, kv_len=kv_len, kv_layout="paged", page_table=table,
                         page_size=PAGE)
    return wg.ops.add(x, wg.ops.linear(wg.ops.reshape(o, S, HQ * D), w["wo"], w["bo"]))


def reference(x, w, cos, sin, k_old, v_old):
    """float64 numpy: the same layer over logical positions 0 .. POS + S - 1."""
    x = x.astype(np.float64)
    f = {k: v.astype(np.float64) for k, v in w.items()}
    h = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-6) * f["norm"]

    def rot(t):
        c, s = cos[POS:POS + S, None, :].astype(np.float64), sin[POS:POS + S, None, :].astype(np.float64)
        a, b = t[..., :D // 2], t[..., D // 2:]
        return np.concatenate([a * c - b * s, b * c + a * s], -1)

    q = rot((h @ f["wq"].T).reshape(S, HQ, D))
    k = np.concatenate([k_old, rot((h @ f["wk"].T).reshape(S, HKV, D))])
    v = np.concatenate([v_old, (h @ f["wv"].T).reshape(S, HKV, D)])
    k, v = np.repeat(k, HQ // HKV, axis=1), np.repeat(v, HQ // HKV, axis=1)
    scores = np.einsum("shd,lhd->hsl", q, k) / np.sqrt(D)
    qpos, kpos = POS + np.arange(S)[:, None], np.arange(POS + S)[None, :]
    scores = np.where(kpos > qpos, -np.inf, scores)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = np.einsum("hsl,lhd->shd", p, v).reshape(S, HQ * D)
    return x + o @ f["wo"].T + f["bo"]


def median_time(run, n: int = 9) -> float:
    """Median seconds of n calls of run() (one call's time on a shared machine is mostly noise)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return sorted(times)[n // 2]


def main():
    dev = wg.default_device()
    rng = np.random.default_rng(0)
    wdt = np.float16 if dev.caps.has_f16 else np.float32
    w = {"norm": rng.standard_normal(DM).astype(np.float32),
         "wq": (rng.standard_normal((HQ * D, DM)) * 0.2).astype(wdt),
         "wk": (rng.standard_normal((HKV * D, DM)) * 0.2).astype(wdt),
         "wv": (rng.standard_normal((HKV * D, DM)) * 0.2).astype(wdt),
         "wo": (rng.standard_normal((DM, HQ * D)) * 0.2).astype(wdt),
         "bo": rng.standard_normal(DM).astype(np.float32)}
    cos, sin = wg.ops.rope_tables(PAGE * PAGES, D)
    table = np.array([2, 0, 3, 1], np.uint32)     # logical page i lives in physical page table[i]
    k_old = rng.standard_normal((POS, HKV, D)).astype(np.float32)
    v_old = rng.standard_normal((POS, HKV, D)).astype(np.float32)
    phys_k, phys_v = np.zeros((PAGE * PAGES, HKV, D), np.float32), np.zeros((PAGE * PAGES, HKV, D), np.float32)
    for p in range(POS):
        row = table[p // PAGE] * PAGE + p % PAGE
        phys_k[row], phys_v[row] = k_old[p], v_old[p]
    x = rng.standard_normal((S, DM)).astype(np.float32)
    exact = reference(x, w, cos, sin, k_old, v_old)

    # ---- immediate: op by op ----
    t = {k: dev.tensor(v) for k, v in w.items()}
    cache = (dev.tensor(phys_k), dev.tensor(phys_v))
    args = (dev.tensor(np.array([POS], np.uint32)), dev.tensor(np.array([POS + S], np.uint32)), cache,
            dev.tensor(table), t, dev.tensor(cos), dev.tensor(sin))
    layer(dev.tensor(x), *args).numpy()           # warm-up: pipelines compiled, pool filled
    dev.write(cache[0], phys_k)                   # undo the warm-up's append
    dev.write(cache[1], phys_v)
    before = dev.stats.snapshot()
    y_imm = layer(dev.tensor(x), *args).numpy()   # the kv append rewrites the same rows: every run is the same
    imm = dev.stats.since(before)
    imm_submits = imm.submits - 1  # minus the readback
    t_imm = median_time(lambda: layer(dev.tensor(x), *args).numpy())

    # ---- one graph, compiled once ----
    g = wg.Graph("transformer_layer")
    gx = g.input("x", (S, DM), "f32")
    gpos, glen = g.input("pos", (1,), "u32"), g.input("kv_len", (1,), "u32")
    gcache = (g.state("k_cache", phys_k.shape, init=phys_k), g.state("v_cache", phys_v.shape, init=phys_v))
    gw = {k: g.const(k, v) for k, v in w.items()}
    g.output("y", layer(gx, gpos, glen, gcache, g.const("page_table", table), gw, g.const("cos", cos),
                        g.const("sin", sin)))
    prog = g.compile(dev)
    prog.run(x=x, pos=POS, kv_len=POS + S)        # warm-up, then reset the cache to the same start
    prog.reset_state()
    before = dev.stats.snapshot()
    out = prog.run(x=x, pos=POS, kv_len=POS + S)
    y_prog = out["y"].numpy()
    delta = dev.stats.since(before)
    t_prog = median_time(lambda: prog.run(x=x, pos=POS, kv_len=POS + S)["y"].numpy())

    print(prog.explain())
    print(f"\nimmediate: {imm.dispatches} dispatches queued in the pending list, {imm_submits} submit, "
          f"median {t_imm * 1e3:.1f} ms\nprogram:   {delta.dispatches} dispatches in {delta.compute_passes} pass, "
          f"{delta.submits - 1} submit, median {t_prog * 1e3:.1f} ms (both: upload x, run, read y back)")
    if dev.caps.is_cpu:
        # Both runs are one submit here, and on a CPU adapter each kernel takes ~0.1-1 ms of the cores' time: the
        # few µs of host work per op a program saves (no planning, one prepared command list) are lost in it,
        # so the two medians are about equal and either may be ahead. On a GPU the kernels take µs and the
        # saving shows: python -m wgraph bench --only host measures it.
        print("on a CPU adapter the kernels' own time hides the host time a program saves (a few µs per\n"
              "op), so either may be ahead; `python -m wgraph bench --only host` measures that saving")
    diff = np.max(np.abs(y_prog - y_imm))
    err = np.max(np.abs(y_prog - exact))
    print(f"max |program - immediate| = {diff:g}; max |program - float64 numpy| = {err:.2e}")
    assert y_prog.tobytes() == y_imm.tobytes(), "program and immediate runs differ"
    assert err < 1e-3, f"error {err} vs float64 numpy is too large"
    assert delta.submits - 1 == 1 and delta.pipelines_created == 0 and delta.bind_groups_created == 0
    print("ok")


if __name__ == "__main__":
    main()
