"""A multi-layer decode loop: each step takes one token's hidden state through L attention layers
(rmsnorm -> QKV -> RoPE -> kv_append -> GQA attention -> output projection -> residual) and feeds the result
back as the next step's input. The position and kv_len live on the GPU, so ONE compiled step is replayed
N times with no planning, no allocation and one submit per token. Also: the same N steps recorded into a
single submit, and all of it checked against op-by-op immediate runs and float64 numpy."""

import sys
import time

import numpy as np

import wgraph as wg

LAYERS, DM, HQ, HKV, D, CAP = 2, 32, 4, 2, 8, 64
N = int(sys.argv[1]) if len(sys.argv) > 1 else 32


def step(x, pos, kv_len, caches, w, cos, sin):
    """One token through every layer; Tensors (immediate / recorded) or graph Values alike."""
    for i, (kc, vc) in enumerate(caches):
        lw = w[i]
        h = wg.ops.rmsnorm(x, lw["norm"])
        q = wg.ops.rope(wg.ops.reshape(wg.ops.linear(h, lw["wq"]), 1, HQ, D), cos, sin, pos=pos)
        k = wg.ops.rope(wg.ops.reshape(wg.ops.linear(h, lw["wk"]), 1, HKV, D), cos, sin, pos=pos)
        v = wg.ops.reshape(wg.ops.linear(h, lw["wv"]), 1, HKV, D)
        wg.ops.kv_append((kc, vc), k, v, pos)
        o = wg.ops.attention(q, kc, vc, causal=True, kv_len=kv_len)
        x = wg.ops.add(x, wg.ops.linear(wg.ops.reshape(o, 1, HQ * D), lw["wo"]))
    return x


def numpy_loop(x, w, cos, sin, n):
    """float64 reference of n steps."""
    x = x.astype(np.float64)
    caches = [(np.zeros((CAP, HKV, D)), np.zeros((CAP, HKV, D))) for _ in range(LAYERS)]
    c64, s64 = cos.astype(np.float64), sin.astype(np.float64)

    def rot(t, p):
        a, b = t[..., :D // 2], t[..., D // 2:]
        return np.concatenate([a * c64[p] - b * s64[p], b * c64[p] + a * s64[p]], -1)

    outs = []
    for p in range(n):
        for i, (kc, vc) in enumerate(caches):
            f = {k: v.astype(np.float64) for k, v in w[i].items()}
            h = x / np.sqrt(np.mean(x * x) + 1e-6) * f["norm"]
            q = rot((h @ f["wq"].T).reshape(HQ, D), p)
            kc[p] = rot((h @ f["wk"].T).reshape(HKV, D), p)
            vc[p] = (h @ f["wv"].T).reshape(HKV, D)
            k, v = np.repeat(kc[:p + 1], HQ // HKV, 1), np.repeat(vc[:p + 1], HQ // HKV, 1)
            sc = np.einsum("hd,lhd->hl", q, k) / np.sqrt(D)
            pr = np.exp(sc - sc.max(-1, keepdims=True))
            pr /= pr.sum(-1, keepdims=True)
            x = x + np.einsum("hl,lhd->hd", pr, v).reshape(1, HQ * D) @ f["wo"].T
        outs.append(x)
    return np.stack(outs)


def main():
    dev = wg.default_device()
    rng = np.random.default_rng(0)
    w = [{"norm": rng.standard_normal(DM).astype(np.float32),
          "wq": (rng.standard_normal((HQ * D, DM)) * 0.2).astype(np.float32),
          "wk": (rng.standard_normal((HKV * D, DM)) * 0.2).astype(np.float32),
          "wv": (rng.standard_normal((HKV * D, DM)) * 0.2).astype(np.float32),
          "wo": (rng.standard_normal((DM, HQ * D)) * 0.1).astype(np.float32)} for _ in range(LAYERS)]
    cos, sin = wg.ops.rope_tables(CAP, D)
    x0 = rng.standard_normal((1, DM)).astype(np.float32)

    # ---- one compiled step, replayed N times; the output feeds the next step on the GPU ----
    g = wg.Graph("decode_step")
    gx, gpos, glen = g.input("x", (1, DM), "f32"), g.input("pos", (1,), "u32"), g.input("kv_len", (1,), "u32")
    caches = [(g.state(f"k{i}", (CAP, HKV, D)), g.state(f"v{i}", (CAP, HKV, D))) for i in range(LAYERS)]
    gw = [{k: g.const(f"l{i}.{k}", v) for k, v in lw.items()} for i, lw in enumerate(w)]
    g.output("y", step(gx, gpos, glen, caches, gw, g.const("cos", cos), g.const("sin", sin)))
    prog = g.compile(dev)
    print(prog.explain())
    feed = dev.tensor(x0)
    replayed = []
    before = dev.stats.snapshot()
    t0 = time.perf_counter()
    for p in range(N):
        y = prog.run(x=feed, pos=p, kv_len=p + 1)["y"]   # a Tensor input is copied in, in the same submit
        feed = y
        replayed.append(y.numpy())
    t_replay = time.perf_counter() - t0
    d = dev.stats.since(before)
    runs = N
    print(f"\nreplay: {N} steps, {d.submits - runs} submits for steps (+{runs} readbacks), "
          f"{d.dispatches} dispatches, created {d.pipelines_created} pipelines / {d.bind_groups_created} bind "
          f"groups / {d.buffers_created} buffers, {t_replay * 1e3 / N:.2f} ms per step (incl. readback)")
    assert d.submits - runs == N and (d.pipelines_created, d.bind_groups_created, d.buffers_created) == (0, 0, 0)

    # ---- the same loop op by op (immediate), GPU position tensors written each step ----
    t = [{k: dev.tensor(v) for k, v in lw.items()} for lw in w]
    tcos, tsin = dev.tensor(cos), dev.tensor(sin)
    icaches = [(dev.tensor(np.zeros((CAP, HKV, D), np.float32)), dev.tensor(np.zeros((CAP, HKV, D), np.float32)))
               for _ in range(LAYERS)]
    ipos, ilen = dev.tensor(np.zeros(1, np.uint32)), dev.tensor(np.zeros(1, np.uint32))
    x, immediate = dev.tensor(x0), []
    for p in range(N):
        dev.write(ipos, np.array([p], np.uint32))
        dev.write(ilen, np.array([p + 1], np.uint32))
        x = step(x, ipos, ilen, icaches, t, tcos, tsin)
        immediate.append(x.numpy())

    # ---- N steps recorded into ONE submit (int positions: each step's uniforms differ) ----
    rcaches = [(dev.tensor(np.zeros((CAP, HKV, D), np.float32)), dev.tensor(np.zeros((CAP, HKV, D), np.float32)))
               for _ in range(LAYERS)]
    before = dev.stats.snapshot()
    with dev.record():
        x, recorded = dev.tensor(x0), []
        for p in range(N):
            x = step(x, p, p + 1, rcaches, t, tcos, tsin)
            recorded.append(x)
    n_submits = dev.stats.since(before).submits
    recorded = np.stack([r.numpy() for r in recorded])
    print(f"recorded: {N} steps in {n_submits} submit")

    exact = numpy_loop(x0, w, cos, sin, N)
    replayed, immediate = np.stack(replayed), np.stack(immediate)
    err = np.max(np.abs(replayed - exact) / (1 + np.abs(exact)))
    print(f"max |replay - immediate| = {np.max(np.abs(replayed - immediate)):g}; "
          f"max |recorded - immediate| = {np.max(np.abs(recorded - immediate)):g}; "
          f"max relative error vs float64 numpy = {err:.2e}")
    assert replayed.tobytes() == immediate.tobytes(), "replay differs from immediate"
    assert n_submits == 1
    assert np.allclose(recorded, exact, rtol=1e-3, atol=1e-3), "recorded loop differs from numpy"
    assert err < 1e-3, f"error {err} vs float64 numpy"
    print("ok")


if __name__ == "__main__":
    main()
