"""Property tests for graphs: random small op graphs (scale, add, rmsnorm, linear, rope, attention over
reshape views, several outputs) compiled once and replayed with new inputs equal op-by-op immediate runs of
the same ops byte for byte, and a replay creates nothing (one submit, no pipelines, bind groups or buffers)."""

import numpy as np
from hypothesis import given, note
from hypothesis import strategies as st

import wgraph as wg

HEADS = 2


@st.composite
def programs(draw):
    S = draw(st.integers(1, 6))
    D = draw(st.sampled_from((8, 16, 32)))
    n_inputs = draw(st.integers(1, 2))
    steps = []
    for _ in range(draw(st.integers(1, 7))):
        n = n_inputs + len(steps)              # values so far
        pick = st.integers(0, n - 1)
        kind = draw(st.sampled_from(("scale", "add", "rmsnorm", "linear", "rope", "attention")))
        if kind == "scale":
            steps.append(("scale", draw(pick), draw(st.sampled_from((0.5, -2.0, 1.25)))))
        elif kind == "add":
            steps.append(("add", draw(pick), draw(pick)))
        elif kind == "rmsnorm":
            steps.append(("rmsnorm", draw(pick)))
        elif kind == "linear":
            steps.append(("linear", draw(pick), draw(st.booleans())))
        elif kind == "rope":
            steps.append(("rope", draw(pick), draw(st.integers(0, 8))))
        else:
            steps.append(("attention", draw(pick), draw(pick), draw(pick), draw(st.booleans())))
    n = n_inputs + len(steps)
    outputs = sorted({n - 1} | set(draw(st.lists(st.integers(0, n - 1), max_size=2))))
    return dict(S=S, D=D, n_inputs=n_inputs, steps=steps, outputs=outputs, seed=draw(st.integers(0, 2**31)))


def _weights(p):
    rng = np.random.default_rng(p["seed"])
    D = p["D"]
    W = {}
    for i, step in enumerate(p["steps"]):
        if step[0] == "rmsnorm":
            W[f"norm{i}"] = rng.standard_normal(D).astype(np.float32)
        elif step[0] == "linear":
            W[f"w{i}"] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
            W[f"b{i}"] = rng.standard_normal(D).astype(np.float32)
    cos, sin = wg.ops.rope_tables(16, D // HEADS)
    W["cos"], W["sin"] = cos, sin
    return W


def _build(p, xs, W):
    """Run the steps on `xs` (Tensors: immediate; Values: graph nodes); W holds tensors or consts."""
    S, D = p["S"], p["D"]
    vals = list(xs)
    for i, step in enumerate(p["steps"]):
        kind = step[0]
        if kind == "scale":
            y = wg.ops.scale(vals[step[1]], step[2])
        elif kind == "add":
            y = wg.ops.add(vals[step[1]], vals[step[2]])
        elif kind == "rmsnorm":
            y = wg.ops.rmsnorm(vals[step[1]], W[f"norm{i}"])
        elif kind == "linear":
            y = wg.ops.linear(vals[step[1]], W[f"w{i}"], W[f"b{i}"] if step[2] else None)
        elif kind == "rope":
            r = wg.ops.rope(wg.ops.reshape(vals[step[1]], S, HEADS, -1), W["cos"], W["sin"], pos=step[2])
            y = wg.ops.reshape(r, S, D)
        else:
            q, k, v = (wg.ops.reshape(vals[j], S, HEADS, -1) for j in step[1:4])
            y = wg.ops.reshape(wg.ops.attention(q, k, v, causal=step[4]), S, D)
        vals.append(y)
    return [vals[j] for j in p["outputs"]]


@given(programs())
def test_compiled_replay_equals_immediate(dev, p):
    note(repr(p))
    W = _weights(p)
    S, D = p["S"], p["D"]
    g = wg.Graph("random")
    xs = [g.input(f"x{i}", (S, D), "f32") for i in range(p["n_inputs"])]
    consts = {k: g.const(k, v) for k, v in W.items()}
    for j, out in zip(p["outputs"], _build(p, xs, consts)):
        if j < p["n_inputs"]:
            out = wg.ops.scale(out, 1.0)      # an input named as an output goes through a node
        g.output(f"y{j}", out)
    prog = g.compile(dev)
    tensors = {k: dev.tensor(v) for k, v in W.items()}
    rng = np.random.default_rng(p["seed"] + 1)
    for run in range(2):
        feeds = {f"x{i}": rng.standard_normal((S, D)).astype(np.float32) for i in range(p["n_inputs"])}
        before = dev.stats.snapshot()
        got = prog.run(**feeds)
        delta = dev.stats.since(before)
        assert delta.submits == 1
        assert (delta.pipelines_created, delta.bind_groups_created, delta.buffers_created) == (0, 0, 0)
        got = {name: t.numpy() for name, t in got.items()}
        want = _build(p, [dev.tensor(feeds[f"x{i}"]) for i in range(p["n_inputs"])], tensors)
        for j, w in zip(p["outputs"], want):
            w = w.numpy()
            if j < p["n_inputs"]:
                w = w * np.float32(1.0)
            assert got[f"y{j}"].tobytes() == w.tobytes(), (run, j)


# ---- the ops the test above leaves out, with state: each replay (and the same graph read back from its JSON) must
# equal the immediate ops on tensors of their own byte for byte, state carried from run to run ----

STATEFUL_KINDS = ("add_rmsnorm", "swiglu_linear", "residual_linear", "softmax", "transpose", "silu", "mul",
                  "layernorm", "flat_add", "geglu", "scale_out", "kv_attention")


@st.composite
def stateful_programs(draw):
    n_inputs = draw(st.integers(1, 2))
    steps, n = [], n_inputs
    for _ in range(draw(st.integers(2, 8))):
        kind = draw(st.sampled_from(STATEFUL_KINDS))
        steps.append((kind, [draw(st.integers(0, n - 1)) for _ in range(3)], draw(st.sampled_from((0.5, 1.25)))))
        n += 2 if kind == "add_rmsnorm" else 1
    outputs = sorted({n - 1} | set(draw(st.lists(st.integers(n_inputs, n - 1), max_size=2))))
    return dict(n_inputs=n_inputs, steps=steps, outputs=outputs, seed=draw(st.integers(0, 2**31)))


def _stateful_build(p, xs, W, state, S, D):
    """The steps on `xs`: Tensors (immediate) or Values; `state` holds the KV ring, its GPU position and an
    accumulator, written in place (kv_append, seqlens_advance, out=)."""
    vals = list(xs)
    for kind, (i, j, k), f in p["steps"]:
        a, b, c = vals[i], vals[j], vals[k]
        if kind == "add_rmsnorm":
            vals += list(wg.ops.add_rmsnorm(a, b, W["norm"]))
        elif kind == "swiglu_linear":
            vals.append(wg.ops.linear(a, W["w_up"], activation="swiglu", norm=W["norm"]))
        elif kind == "residual_linear":
            vals.append(wg.ops.linear(a, W["w"], W["b"], residual=b))
        elif kind == "softmax":
            vals.append(wg.ops.softmax(a))
        elif kind == "transpose":
            vals.append(wg.ops.reshape(wg.ops.transpose01(wg.ops.reshape(a, S, HEADS, -1)), S, D))
        elif kind == "silu":
            vals.append(wg.ops.silu(a))
        elif kind == "mul":
            vals.append(wg.ops.mul(a, b))
        elif kind == "layernorm":
            vals.append(wg.ops.layernorm(a, W["norm"], W["b"]))
        elif kind == "flat_add":
            vals.append(wg.ops.reshape(wg.ops.add(wg.ops.reshape(a, S * D), wg.ops.reshape(b, S * D)), S, D))
        elif kind == "geglu":
            vals.append(wg.ops.geglu(wg.ops.linear(a, W["w_up"]), approximate="tanh"))
        elif kind == "scale_out":
            wg.ops.scale(a, f, out=state["acc"])
            vals.append(wg.ops.add(state["acc"], b))
        else:
            wg.ops.kv_append((state["kc"], state["vc"]), wg.ops.reshape(a, S, HEADS, -1),
                             wg.ops.reshape(b, S, HEADS, -1), state["pos"], layout="ring")
            wg.ops.seqlens_advance(state["pos"], S)
            q = wg.ops.rope(wg.ops.reshape(c, S, HEADS, -1), W["cos"], W["sin"], pos=state["pos"])
            vals.append(wg.ops.reshape(wg.ops.attention(q, state["kc"], state["vc"], causal=False, kv_layout="ring"),
                                       S, D))
    return [vals[j] for j in p["outputs"]]


@given(stateful_programs())
def test_stateful_replay_and_json_equal_immediate(dev, p):
    note(repr(p))
    S, D = 3, 16
    rng = np.random.default_rng(p["seed"])
    cos, sin = wg.ops.rope_tables(64, D // HEADS)
    W = {"w_up": (rng.standard_normal((2 * D, D)) / 4).astype(np.float32),
         "w": (rng.standard_normal((D, D)) / 4).astype(np.float32), "b": rng.standard_normal(D).astype(np.float32),
         "norm": rng.standard_normal(D).astype(np.float32), "cos": cos, "sin": sin}
    ring = np.zeros((4 * S, HEADS, D // HEADS), np.float32)
    init = {"kc": ring, "vc": ring, "pos": np.zeros(1, np.uint32), "acc": np.zeros((S, D), np.float32)}
    g = wg.Graph("stateful")
    xs = [g.input(f"x{i}", (S, D), "f32") for i in range(p["n_inputs"])]
    consts = {k: g.const(k, v) for k, v in W.items()}
    states = {k: g.state(k, v.shape, "u32" if v.dtype == np.uint32 else "f32", init=v) for k, v in init.items()}
    for j, out in zip(p["outputs"], _stateful_build(p, xs, consts, states, S, D)):
        g.output(f"y{j}", out)
    progs = {"replay": g.compile(dev), "json": wg.Graph.from_json(g.to_json()).compile(dev)}
    tensors = {k: dev.tensor(v) for k, v in W.items()}
    state_tensors = {k: dev.tensor(v) for k, v in init.items()}
    for run in range(3):   # inputs as numpy, then as Tensors: the same bytes either way
        feeds = {f"x{i}": rng.standard_normal((S, D)).astype(np.float32) for i in range(p["n_inputs"])}
        got = {name: {k: t.numpy() for k, t in prog.run(**(feeds if run != 1 else {k: dev.tensor(v) for k, v in
                                                                                       feeds.items()})).items()}
               for name, prog in progs.items()}
        want = _stateful_build(p, [dev.tensor(feeds[f"x{i}"]) for i in range(p["n_inputs"])], tensors,
                               state_tensors, S, D)
        for j, w in zip(p["outputs"], want):
            for name in progs:
                assert got[name][f"y{j}"].tobytes() == w.numpy().tobytes(), (name, run, j)
    for k, t in state_tensors.items():
        for name, prog in progs.items():
            assert prog.state(k).numpy().tobytes() == t.numpy().tobytes(), (name, k)


# ---- the decode ops, in all three modes: fused and quantized linear, KV appends at GPU positions that advance each
# replay, attention with kv_len from a state, batched kvcache attention (a batch of one into out= too), token ids
# fed back through a state; a compiled replay, a recording and the immediate ops give the same bytes ----

DECODE_KINDS = ("linear", "qlinear", "rope_kv", "kvcache", "kvcache_one", "tokens", "sample", "varlen")


@st.composite
def decode_programs(draw):
    n_inputs = draw(st.integers(1, 2))
    steps, n = [], n_inputs
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(DECODE_KINDS))
        opts = (draw(st.booleans()), draw(st.booleans()), draw(st.booleans()), draw(st.booleans()))
        steps.append((kind, [draw(st.integers(0, n - 1)) for _ in range(3)], opts))
        n += 1
    outputs = sorted({n - 1} | set(draw(st.lists(st.integers(n_inputs, n - 1), max_size=2))))
    return dict(S=draw(st.sampled_from((1, 3))), n_inputs=n_inputs, steps=steps, outputs=outputs,
                seed=draw(st.integers(0, 2**31)))


def _decode_build(p, xs, W, state, step):
    """The steps on `xs` (Tensors or Values); `state` holds the caches, their GPU positions and lengths, a token."""
    from wgraph.ops.quantized import QuantizedWeight

    S, D, H = p["S"], 16, 32
    vals = list(xs)
    for i, (kind, (i0, i1, i2), (f0, f1, f2, f3)) in enumerate(p["steps"]):
        a, b, c = vals[i0], vals[i1], vals[i2]
        if kind in ("linear", "qlinear"):   # x [S, 32] -> [S, 32] through [64, 32] with swiglu, else [32, 32]
            w = W["w_up"] if f2 else W["w"]
            if kind == "qlinear":
                w = QuantizedWeight("Q8_0" if f3 else "Q4_0", w.shape, W[f"q_{'up' if f2 else 'w'}_{int(f3)}"])
            vals.append(wg.ops.linear(a, w, W["b64" if f2 else "b"] if f0 else None, norm=W["norm"] if f1 else None,
                                      activation="swiglu" if f2 else None, residual=b if f3 else None))
        elif kind == "rope_kv":             # qkv of 2 q heads and 2 kv heads, appended at the GPU position
            cache, pos = (state["kc"], state["vc"]), state["pos"]
            q = wg.ops.linear_rope_kv_append(a, W["w_qkv16" if f0 else "w_qkv"], W["cos"], W["sin"], cache, pos,
                                             q_heads=HEADS, norm=W["norm"] if f1 else None)
            wg.ops.seqlens_advance(pos, S)
            vals.append(wg.ops.reshape(wg.ops.attention(q, *cache, causal=f2, kv_len=pos,
                                                        sliding_window=4 if f3 else 0), S, H))
        elif kind == "kvcache":             # S sequences of one query each, a new row each
            q, kn, vn = (wg.ops.reshape(t, S, 1, HEADS, D) for t in (a, b, c))
            out = wg.ops.attention_kvcache(q, state["bk"], state["bv"], cache_seqlens=state["lens"], k_new=kn,
                                           v_new=vn, causal=f0, softcap=5.0 if f1 else 0.0)
            wg.ops.seqlens_advance(state["lens"], 1)
            vals.append(wg.ops.reshape(out, S, H))
        elif kind == "kvcache_one":         # a batch of one: the single-sequence attention, into out= or not
            q = wg.ops.reshape(wg.ops.add(a, b), 1, S, HEADS, D)
            kw = dict(cache_seqlens=state["len1"] if f0 else [30], causal=f1, window=(3, -1) if f2 else (-1, -1))
            if f3 or S > 1:   # out= a state ran the batched kernels in a program (over 16 keys: other bits)
                wg.ops.attention_kvcache(q, state["k1"], state["k1"], out=state["o1"], **kw)
                vals.append(wg.ops.reshape(wg.ops.scale(state["o1"], 1.0), S, H))
            else:
                vals.append(wg.ops.reshape(wg.ops.attention_kvcache(q, state["k1"], state["k1"], **kw), S, H))
        elif kind == "tokens":              # the last replay's ids feed this one's embedding
            e = wg.ops.embedding(state["tok"], W["table"])
            wg.ops.argmax(wg.ops.add(a, e) if f0 else a, out=state["tok"])
            vals.append(e)
        elif kind == "sample":
            ids = wg.ops.sample(a, temperature=0.5 if f0 else 1.0, top_k=5 if f1 else 0, top_p=0.9 if f2 else 1.0,
                                seed=7, step=step)
            vals.append(wg.ops.embedding(ids, W["table"]))
        else:                               # packed rows of sequences [0, 1) and [1, S)
            q, k, v = (wg.ops.reshape(t, S, HEADS, D) for t in (a, b, c))
            cu = [0, 1, S] if S > 1 else [0, 1]
            vals.append(wg.ops.reshape(wg.ops.attention_varlen(q, k, v, cu, cu, max_seqlen_q=S, max_seqlen_k=S,
                                                               causal=f0, softcap=5.0 if f1 else 0.0), S, H))
    return [vals[j] for j in p["outputs"]]


@given(decode_programs())
def test_decode_ops_replay_record_and_immediate_agree(dev, p):
    from wgraph.ggml_blocks import quantize

    note(repr(p))
    S, D, H = p["S"], 16, 32
    rng = np.random.default_rng(p["seed"])
    cos, sin = wg.ops.rope_tables(32, D)   # positions 1 .. 30: 5 steps of 3 rows, 2 runs
    w = (rng.standard_normal((H, H)) / 6).astype(np.float32)
    w_up = (rng.standard_normal((2 * H, H)) / 6).astype(np.float32)
    w_qkv = (rng.standard_normal((6 * D, H)) / 6).astype(np.float32)
    W = {"w": w, "w_up": w_up, "b": rng.standard_normal(H).astype(np.float32),
         "b64": rng.standard_normal(2 * H).astype(np.float32), "norm": rng.standard_normal(H).astype(np.float32),
         "w_qkv": w_qkv, "w_qkv16": w_qkv.astype(np.float16), "cos": cos, "sin": sin,
         "table": rng.standard_normal((H, H)).astype(np.float32)}
    for name, m in (("w", w), ("up", w_up)):
        for f3, fmt in ((0, "Q4_0"), (1, "Q8_0")):
            W[f"q_{name}_{f3}"] = quantize(m, fmt).blocks
    init = {"kc": np.zeros((32, HEADS, D), np.float32), "vc": np.zeros((32, HEADS, D), np.float32),
            "pos": np.array([1], np.uint32), "bk": rng.standard_normal((S, 16, HEADS, D)).astype(np.float32),
            "bv": rng.standard_normal((S, 16, HEADS, D)).astype(np.float32),
            "lens": rng.integers(0, 4, S).astype(np.uint32), "k1": rng.standard_normal((1, 40, HEADS, D)).astype(
                np.float32), "len1": np.array([S + 30], np.uint32), "o1": np.zeros((1, S, HEADS, D), np.float32),
            "tok": np.arange(S, dtype=np.uint32)}
    g = wg.Graph("decode")
    xs = [g.input(f"x{i}", (S, H), "f32") for i in range(p["n_inputs"])]
    step = g.input("step", (1,), "u32")
    consts = {k: g.const(k, v) for k, v in W.items()}
    states = {k: g.state(k, v.shape, "u32" if v.dtype == np.uint32 else "f32", init=v) for k, v in init.items()}
    for j, out in zip(p["outputs"], _decode_build(p, xs, consts, states, step)):
        g.output(f"y{j}", out)
    prog = g.compile(dev)
    tensors = {k: dev.tensor(v) for k, v in W.items()}
    now_states, rec_states = ({k: dev.tensor(v) for k, v in init.items()} for _ in range(2))
    for run in range(2):
        feeds = {f"x{i}": rng.standard_normal((S, H)).astype(np.float32) for i in range(p["n_inputs"])}
        got = {k: t.numpy() for k, t in prog.run(step=run, **feeds).items()}
        now = _decode_build(p, [dev.tensor(feeds[f"x{i}"]) for i in range(p["n_inputs"])], tensors, now_states, run)
        with dev.record():
            rec = _decode_build(p, [dev.tensor(feeds[f"x{i}"]) for i in range(p["n_inputs"])], tensors, rec_states,
                                dev.tensor(np.array([run], np.uint32)))
        for j, a, r in zip(p["outputs"], now, rec):
            assert got[f"y{j}"].tobytes() == a.numpy().tobytes() == r.numpy().tobytes(), (run, j)
    for k, t in now_states.items():
        assert prog.state(k).numpy().tobytes() == t.numpy().tobytes() == rec_states[k].numpy().tobytes(), k
