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
