"""Graphs: build-time errors naming the node, compile (order, memory plan, one arena), replay equal to
op-by-op immediate runs byte for byte, dev.stats proof of no creation on replay, run-time input errors with
nothing submitted, views, indirect dispatch, update() of dirty uniforms, DOT and JSON round trip, and a
64-step decode loop (rmsnorm, linear, rope, kv_append, attention) replayed vs immediate."""

import base64
import json
import re

import attrs
import numpy as np
import pytest

import wgraph as wg
from wgraph.graph import GraphError

from kernel_support import BDPA_BASIS, TIERED_HOT, f16_or_f32, skip_unless_f16


def _block(x, w, b, norm_w, cos, sin, pos, heads):
    """The same code builds a graph (given Values) or runs immediately (given Tensors)."""
    h = wg.ops.rmsnorm(x, norm_w)
    y = wg.ops.linear(h, w, b)
    y3 = wg.ops.reshape(y, y.shape[0], heads, -1)
    r = wg.ops.rope(y3, cos, sin, pos=pos)
    return wg.ops.add(wg.ops.reshape(r, y.shape), wg.ops.scale(x, 0.5))


def _weights(rng, d=32, s=3):
    cos, sin = wg.ops.rope_tables(16, 8)
    return dict(w=rng.standard_normal((d, d)).astype(np.float32) * 0.2, b=rng.standard_normal(d).astype(np.float32),
                norm_w=rng.standard_normal(d).astype(np.float32), cos=cos, sin=sin), s, d


def _block_graph(W, s, d):
    g = wg.Graph("block")
    x = g.input("x", (s, d), "f32")
    pos = g.input("pos", (1,), "u32")
    c = {k: g.const(k, v) for k, v in W.items()}
    g.output("y", _block(x, c["w"], c["b"], c["norm_w"], c["cos"], c["sin"], pos, heads=4))
    return g


def _block_immediate(dev, W, x, p):
    t = {k: dev.tensor(v) for k, v in W.items()}
    return _block(dev.tensor(x), t["w"], t["b"], t["norm_w"], t["cos"], t["sin"],
                  dev.tensor(np.array([p], np.uint32)), heads=4).numpy()


def test_replay_equals_immediate_and_creates_nothing(dev, rng):
    W, s, d = _weights(rng)
    prog = _block_graph(W, s, d).compile(dev)
    for run, p in enumerate([2, 9, 5]):
        x = rng.standard_normal((s, d)).astype(np.float32)
        before = dev.stats.snapshot()
        out = prog.run(x=x, pos=p)
        delta = dev.stats.since(before)
        got = out["y"].numpy()
        assert got.tobytes() == _block_immediate(dev, W, x, p).tobytes()
        assert (delta.submits, delta.compute_passes, delta.dispatches) == (1, 1, 5)
        assert (delta.pipelines_created, delta.bind_groups_created, delta.buffers_created) == (0, 0, 0)
        assert delta.uniform_bytes_written == 0 and delta.staging_buffers_created == 0
    # and the block really computes x/2 + rope(linear(rmsnorm(x))) (float64 check of the composition)
    x64 = x.astype(np.float64)
    h = x64 / np.sqrt(np.mean(x64 ** 2, -1, keepdims=True) + 1e-6) * W["norm_w"]
    y = (h @ W["w"].astype(np.float64).T + W["b"]).reshape(s, 4, 8)
    c, sn = W["cos"][p:p + s, None, :], W["sin"][p:p + s, None, :]
    r = np.concatenate([y[..., :4] * c - y[..., 4:] * sn, y[..., 4:] * c + y[..., :4] * sn], -1)
    np.testing.assert_allclose(got, r.reshape(s, d) + x64 / 2, rtol=1e-4, atol=1e-4)


def _gemv_r8(dev) -> str:
    """The 8-row f32 GEMV the plan table gives this device: a CPU adapter's own class, subgroup sums, or the
    workgroup-memory variant."""
    if not dev.caps.has_subgroups:
        return "gemv_r8_wg_f32"
    return "gemv_r8_cpu_f32" if dev.caps.is_cpu else "gemv_r8_f32"


def _gemv_r8_workgroups(n: int, dev) -> int:
    """Workgroups of the 8-row GEMV for n output features: ceil(n / (slots x weight rows per slot))."""
    from wgraph.kernels.registry import kernel

    k = kernel(_gemv_r8(dev))
    rows = k.threads // k.limits["lanes"] * k.limits["features_per_lane"]
    return -(-n // rows)


def test_compile_is_deterministic_and_explains(dev, rng):
    W, s, d = _weights(rng)
    g = _block_graph(W, s, d)
    assert g.topological_order() == _block_graph(W, s, d).topological_order()
    prog = g.compile(dev)
    text = prog.explain(full=True)
    for word in ("rmsnorm_f32", _gemv_r8(dev), "3 rows <= 8", ": GEMV, ", "rope_f32", "add_f32", "scale_f32",
                 "peak", "naive", "uniform arena", "fallback.gemv.norm"):
        assert word in text
    assert [r.variant for r in prog.rows] == ["rmsnorm_f32", _gemv_r8(dev), "rope_f32", "scale_f32", "add_f32"]
    linear_row = prog.rows[1]  # no norm weight or residual: their bindings get fallbacks
    assert linear_row.reads == ("rmsnorm_1:0", "w", "fallback.gemv.norm", "b", "fallback.gemv.residual")
    assert linear_row.writes == ("linear_2:0",)
    # 32 features at (workgroup_size / lanes) slots x features_per_lane rows of W per workgroup (the registry's
    # gemv_r8 numbers); 10 u32/f32 uniforms
    assert linear_row.workgroups == f"{_gemv_r8_workgroups(32, dev)}x1x1" and linear_row.uniform_bytes == 48
    # one arena: every slice at the device's uniform alignment
    align = max(dev.caps.min_uniform_offset_alignment, 32)
    assert prog.memory.uniform_bytes <= sum(-(-r.uniform_bytes // align) * align for r in prog.rows)


def test_chain_of_ten_uses_two_intermediate_buffers(dev, rng):
    g = wg.Graph("chain")
    x = g.input("x", (300,), "f32")
    y = x
    for i in range(10):
        y = wg.ops.scale(y, 1.0 + i / 8) if i % 2 else wg.ops.add(y, x)
    g.output("y", y)
    prog = g.compile(dev)
    m = prog.memory
    assert m.intermediate_values == 9 and m.intermediate_buffers == 2
    assert m.intermediate_bytes == 2 * 1200 and m.naive_bytes == 9 * 1200
    a = rng.standard_normal(300).astype(np.float32)
    t = dev.tensor(a)
    ref = t
    for i in range(10):
        ref = wg.ops.scale(ref, 1.0 + i / 8) if i % 2 else wg.ops.add(ref, t)
    assert prog.run(x=a)["y"].numpy().tobytes() == ref.numpy().tobytes()


def test_buffers_are_reused_only_when_lives_do_not_overlap(dev, rng):
    g = wg.Graph("diamond")
    x = g.input("x", (64,), "f32")
    a = wg.ops.scale(x, 2.0)          # a lives until the last add
    b = wg.ops.scale(x, 3.0)
    c = wg.ops.add(a, b)
    d = wg.ops.scale(c, 0.5)
    g.output("y", wg.ops.add(d, a))
    prog = g.compile(dev)
    slots = prog.memory_plan_slots
    assert len({slots[v.name] for v in (a, b, c)}) == 3 and slots[d.name] != slots[a.name]
    v = rng.standard_normal(64).astype(np.float32)
    exact = (v * 2 + v * 3) * 0.5 + v * 2
    np.testing.assert_array_equal(prog.run(x=v)["y"].numpy(), ((v * np.float32(2) + v * np.float32(3)) * np.float32(0.5)) + v * np.float32(2))
    assert np.allclose(prog.run(x=v)["y"].numpy(), exact, rtol=1e-6)


def test_views_alias_and_cost_nothing(dev):
    g = wg.Graph("views")
    x = g.input("x", (2, 6), "f32")
    v = x.reshape(3, 4)
    y = wg.ops.scale(v, 2.0)
    g.output("y", y.reshape(12))
    g.output("v", v)
    prog = g.compile(dev)
    assert len(prog.rows) == 1
    out = prog.run(x=np.arange(12, dtype=np.float32).reshape(2, 6))
    assert out["v"].buffer is prog.state("x").buffer and out["v"].shape == (3, 4)
    np.testing.assert_array_equal(out["y"].numpy(), np.arange(12) * 2.0)
    with pytest.raises(wg.ShapeError, match=r"node 'reshape_\d+' \(reshape\): reshape: cannot view \(2, 6\)"):
        x.reshape(5, 3)


def test_indirect_counts_from_a_gpu_value(dev, rng):
    g = wg.Graph("indirect")
    x = g.input("x", (1024,), "f32")
    args = g.state("args", (3,), "u32", init=np.array([4, 1, 1], np.uint32))
    g.output("y", wg.ops.scale(x, 3.0, indirect=args))
    prog = g.compile(dev)
    assert prog.rows[0].workgroups == "indirect(args+0)"
    a = rng.standard_normal(1024).astype(np.float32)
    first = prog.run(x=a)["y"].numpy()
    np.testing.assert_array_equal(first, a * np.float32(3))
    dev.write(prog.state("args"), np.array([1, 1, 1], np.uint32))  # the GPU now runs one workgroup
    second = prog.run(x=a * 2)["y"].numpy()
    np.testing.assert_array_equal(second[:256], a[:256] * np.float32(6))
    np.testing.assert_array_equal(second[256:], first[256:])  # untouched since the first run


@pytest.mark.parametrize("view", [False, True])
def test_a_graph_files_indirect_counts_ask_for_no_more_than_the_data_needs(dev, rng, view):
    """A 600-byte graph file whose state init held indirect counts [65535, 65535, 1] for 1024 elements read,
    compiled and ran 4.3e9 workgroups (~55 minutes on lavapipe: a hang driven by a number in a file, found by a
    fuzz of the readers). from_json now refuses counts past what the node's data needs (1024 elements: 4
    workgroups), the state read directly or through a reshape view; the exact need still loads and runs right."""
    def text(counts):
        g = wg.Graph("indirect")
        x = g.input("x", (1024,), "f32")
        args = g.state("args", (3,), "u32", init=np.array(counts, np.uint32))
        g.output("y", wg.ops.scale(x, 3.0, indirect=args.reshape(1, 3).reshape(3) if view else args))
        return g.to_json()

    for counts in ([65535, 65535, 1], [5, 1, 1], [1, 1, 5], [2, 2, 2]):
        with pytest.raises(wg.GraphError, match=rf"reads state 'args' as its indirect workgroup counts, whose "
                                                rf"init asks for {' x '.join(map(str, counts))} workgroups; its "
                                                rf"1024 elements need 4 \(a file's counts may ask for no more\)"):
            wg.Graph.from_json(text(counts))
    for counts in ([4, 1, 1], [2, 2, 1], [1, 1, 1]):
        prog = wg.Graph.from_json(text(counts)).compile(dev)
        a = rng.standard_normal(1024).astype(np.float32)
        got = prog.run(x=a)["y"].numpy()
        covered = 256 * int(np.prod(counts))   # a workgroup covers 256 elements (docs/ops.md)
        np.testing.assert_array_equal(got[:covered], a[:covered] * np.float32(3))


def test_update_rewrites_only_dirty_uniforms(dev, rng):
    g = wg.Graph("upd")
    x = g.input("x", (100,), "f32")
    y = x
    for _ in range(6):
        y = wg.ops.scale(y, 1.5)
    g.output("y", y)
    prog = g.compile(dev)
    a = rng.standard_normal(100).astype(np.float32)
    prog.run(x=a)
    prog.update("scale_4", wg.ops.elementwise.ScaleParams(-2.0))
    before = dev.stats.snapshot()
    out = prog.run(x=a)
    delta = dev.stats.since(before)
    got = out["y"].numpy()
    assert 0 < delta.uniform_bytes_written <= 8  # the one changed f32 (aligned to 4 bytes)
    assert (delta.bind_groups_created, delta.pipelines_created, delta.buffers_created, delta.submits) == (0, 0, 0, 1)
    ref = dev.tensor(a)
    for f in (1.5, 1.5, 1.5, -2.0, 1.5, 1.5):
        ref = wg.ops.scale(ref, f)
    assert got.tobytes() == ref.numpy().tobytes()
    with pytest.raises(GraphError, match="has no dispatches"):
        prog.update("x", None)
    # the program changed, not the graph: it still compiles to the old factor
    assert prog.params["scale_4"].factor == -2.0 and g.node("scale_4").params.factor == 1.5
    np.testing.assert_array_equal(g.compile(dev).run(x=a)["y"].numpy(), ref_all_15(dev, a))



def test_update_after_the_device_changed_under_it_is_a_device_error(monkeypatch):
    """Program.update captures the node outside the device lock, then looks up pipelines and bind groups under it: a
    dev.recreate() or dev.destroy() on another thread in between made those wgpu's raw GPUValidationError (the old
    device's buffers on the new one; 'Parent device is lost'), params unchanged. DeviceError naming the epoch now.
    (The other thread is simulated: the capture itself replaces the device.)"""
    from wgraph.graph.program import Program

    d = wg.Device()   # a device of its own: this test re-creates and destroys it
    g = wg.Graph("upd")
    g.output("y", wg.ops.scale(g.input("x", (4,), "f32"), 2.0))
    capture = Program._capture
    for change, now in (("recreate", r"epoch \d+"),):   # a destroy ("the device is now lost") takes the same check
        prog = g.compile(d)
        node = next(iter(prog.params))

        def racy(self, *a, change=change):
            tpl = capture(self, *a)
            getattr(d, change)()
            return tpl

        monkeypatch.setattr(Program, "_capture", racy)
        with pytest.raises(wg.DeviceError, match=rf"^program 'upd' was compiled for .* epoch \d+; the device is now "
                                                 rf"{now}: compile the graph again"):
            prog.update(node, attrs.evolve(prog.params[node], factor=3.0))
        monkeypatch.setattr(Program, "_capture", capture)
        assert prog.params[node].factor == 2.0


def test_update_takes_numpy_scalars_as_the_numbers_they_are(dev, rng):
    """update() is given params a caller built (attrs.evolve with numpy scalars): each field is made the plain
    Python number it is, as an op call's rules make them. np.int16 kv_start = 32700 kept as numpy made attention's
    position arithmetic int16 (kv_start + kv_len wrapped: numpy's overflow warning) and prog.params held it."""
    import warnings

    import attrs

    from tests.attention_reference import attention_reference

    g = wg.Graph("upd_numpy")
    q = g.input("q", (1, 2, 16), "f32")
    k, v = (g.input(n, (300, 2, 16), "f32") for n in "kv")
    g.output("o", wg.ops.attention(q, k, v, kv_len=200, causal=True, sliding_window=50))
    prog = g.compile(dev)
    (name,) = prog.params
    qa, ka, va = (rng.standard_normal(s).astype(np.float32) for s in ((1, 2, 16), (300, 2, 16), (300, 2, 16)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # numpy's "overflow encountered in scalar add"
        prog.update(name, attrs.evolve(prog.params[name], kv_start=np.int16(32700), kv_len=np.uint8(250)))
    p = prog.params[name]
    assert (type(p.kv_start), p.kv_start, type(p.kv_len), p.kv_len) == (int, 32700, int, 250)
    ref = attention_reference(qa, ka, va, causal=True, kv_start=32700, kv_len=250, sliding_window=50)
    np.testing.assert_allclose(prog.run(q=qa, k=ka, v=va)["o"].numpy(), ref, rtol=1e-4, atol=1e-5)


def _int_kv_len_graph(rng, kind, kv_dtype=np.float16):
    """A one-query attention of `kind` over f16 keys (attention: of kv_dtype) with an int kv_len (no kv_len tensor
    input)."""
    from wgraph.ops.bdpa import BDPACache, bdpa_attention, bdpa_decompose, rope_table

    g = wg.Graph(kind)
    q = g.input("q", (1, 4, 16), "f32")
    if kind == "attention":
        k = g.const("k", rng.standard_normal((24, 2, 16)).astype(kv_dtype))
        g.output("o", wg.ops.attention(q, k, k, causal=True, kv_len=20))
    elif kind == "tiered":
        hot, cold = (g.const(n, rng.standard_normal((r, 2, 16)).astype(np.float16)) for n, r in (("hot", 8), ("cold", 24)))
        g.output("o", wg.ops.tiered_attention(q, hot, hot, cold, cold, kv_len=20, causal=True))
    else:
        host = bdpa_decompose(rng.standard_normal((24, 2, 16)), rng.standard_normal((24, 2, 16)), np.arange(24) % 5)
        parts = {"basis": host.basis, "residual": host.residual, "residual_scale": host.residual_scale,
                 "index": host.index}
        cache = BDPACache(*(g.const(n, a) for n, a in parts.items()), int(host.index[:, 2].max()))
        g.output("o", bdpa_attention(q, cache, g.const("rope", rope_table(*wg.ops.rope_tables(32, 16))), q_pos=23,
                                     kv_len=20, causal=True))
    return g


@pytest.mark.parametrize("kind", ["attention", "tiered", "bdpa"])
def test_update_to_gpu_kv_len_without_a_kv_len_input_is_refused(dev, rng, kind):
    """kv_len=None means "read the kv_len tensor": a node built with an int kv_len has none, so update() (and a
    graph file saying so) is refused by the op's own rule, naming the node and kv_len (tiered and bdpa compared
    None with an int: a TypeError), and the program runs on as compiled."""
    skip_unless_f16(dev, "f32" if kind == "attention" else "f16", why=BDPA_BASIS if kind == "bdpa" else TIERED_HOT)
    g = _int_kv_len_graph(rng, kind, f16_or_f32(dev))
    node = g.topological_order()[-1]
    prog = g.compile(dev)
    q = rng.standard_normal((1, 4, 16)).astype(np.float32)
    before = prog.run(q=q)["o"].numpy().copy()
    import attrs

    with pytest.raises(wg.ShapeError, match=rf"node {re.escape(repr(node))}.*kv_len must be an int or a u32 tensor "
                                            rf"with one value, got nothing"):
        prog.update(node, attrs.evolve(prog.params[node], kv_len=None))
    assert prog.run(q=q)["o"].numpy().tobytes() == before.tobytes()
    data = json.loads(g.to_json())
    data["nodes"][-1]["params"]["fields"]["kv_len"] = None
    with pytest.raises(wg.ShapeError, match="kv_len must be an int or a u32 tensor with one value, got nothing"):
        wg.Graph.from_json(json.dumps(data))

def ref_all_15(dev, a):
    ref = dev.tensor(a)
    for _ in range(6):
        ref = wg.ops.scale(ref, 1.5)
    return ref.numpy()


def _counter(dev):
    """A compiled graph whose state n (4 f32) every replay increments by one (two dispatches), flushed."""
    g = wg.Graph("count")
    one = g.const("one", np.ones(4, np.float32))
    n = g.state("n", (4,), "f32")
    wg.ops.add(wg.ops.scale(n, 1.0), one, out=n)
    prog = g.compile(dev)
    dev.flush()
    return prog


def test_run_many_keeps_a_window_of_replays_in_flight(dev):
    """A counter state incremented by every replay: n replays in n submits, in order, waiting on fences (no
    readback) whenever `in_flight` are unfinished."""
    prog = _counter(dev)
    before = dev.stats.snapshot()
    host = prog.run_many(12, in_flight=3)
    d = dev.stats.since(before)
    assert isinstance(host, float) and host >= 0
    assert (d.submits, d.dispatches, d.readbacks) == (12, 24, 0)
    assert d.gpu_waits == 12 - 3                       # a wait for the oldest each time the window is full
    assert prog.state("n").numpy().tolist() == [12.0] * 4
    assert prog.run_many(0) == 0.0
    for bad in ({"n": -1}, {"n": 2.0}, {"n": 2, "in_flight": 0}, {"n": 2, "in_flight": True},
                {"n": 2, "per_submit": 0}, {"n": 2, "per_submit": 1025}):
        with pytest.raises(wg.ArgumentError, match=r"Program.run_many: (n|in_flight|per_submit)=.* must be an integer"):
            prog.run_many(**bad)


def test_a_state_fed_as_an_input_is_read_as_it_was_when_each_replay_starts(dev):
    """x fed prog.state('s') while the program writes s (s = 2s + x): each replay copies s into x at its start, so
    three replays triple s three times however many share a submit (per_submit 1, 2, 3), against float64; one run
    returns t = 3 s0 and leaves s = t. (Tensor inputs are copied again by every replay of a submit.)"""
    g = wg.Graph("fb")
    x = g.input("x", (4,), "f32")
    s0 = np.array([1.0, -2.0, 0.5, 4.0], np.float32)
    s = g.state("s", (4,), init=s0)
    t = wg.ops.add(wg.ops.scale(s, 2.0), x)
    wg.ops.scale(t, 1.0, out=s)
    g.output("t", t)
    prog = g.compile(dev)
    for per_submit in (1, 2, 3):
        prog.reset_state()
        prog.run_many(3, per_submit=per_submit, x=prog.state("s"))
        np.testing.assert_array_equal(prog.state("s").numpy(), s0.astype(np.float64) * 27)
    prog.reset_state()
    out = prog.run(x=prog.state("s"))["t"].numpy()
    np.testing.assert_array_equal(out, s0.astype(np.float64) * 3)
    np.testing.assert_array_equal(prog.state("s").numpy(), out)


def test_inputs_named_as_the_run_methods_own_parameters(dev):
    """Graph input names are any text: an input called 'self' could never be fed (prog.run(self=...) was Python's
    TypeError 'got multiple values for argument self', in run, run_many and profile), and one called 'in_flight' or
    'per_submit' had its value taken by run_many's own argument (in_flight=3 set the window, then the input was
    'missing' though given). 'self' is an input like any other now; run_many refuses the others by name."""
    for name in ("self", "inputs"):
        g = wg.Graph("kw")
        g.output("y", wg.ops.scale(g.input(name, (2,), "f32"), 3.0))
        prog = g.compile(dev)
        np.testing.assert_array_equal(prog.run(**{name: [1.0, -2.0]})["y"].numpy(), [3.0, -6.0])
        np.testing.assert_array_equal(prog(**{name: [0.5, 2.0]})["y"].numpy(), [1.5, 6.0])
        prog.run_many(2, **{name: [4.0, 1.0]})
        np.testing.assert_array_equal(prog.state(name).numpy(), [4.0, 1.0])
        if dev.caps.has_timestamps:
            assert [r.op for r in prog.profile(**{name: [1.0, 1.0]}).rows] == ["scale"]
    for name in ("n", "in_flight", "per_submit"):
        g = wg.Graph("kw")
        g.output("k", g.input(name, (1,), "u32"))
        g.output("y", wg.ops.scale(g.input("x", (1,), "f32"), 2.0))
        prog = g.compile(dev)
        kwargs = {"n": 2, name: 3, "x": 1.0} if name != "n" else {"n": 3, "x": 1.0}
        _nothing_submitted(dev, lambda: prog.run_many(**kwargs), GraphError,
                           rf"^program 'kw': run_many\(\): input '{name}' has the name of run_many's own {name}= "
                           rf"argument, which would take its value: give the input another name \(run and profile "
                           rf"take it as it is\)$")
        out = prog.run(**{name: 3, "x": 1.0})   # run takes it
        assert (out["k"].numpy().tolist(), out["y"].numpy().tolist()) == ([3], [2.0])


def test_run_many_of_a_program_without_dispatches_waits_for_nothing(dev):
    """A program that only views its input submits nothing: run_many's window still took the device's latest fence
    (older work's, here a readback's) once per replay, and with in_flight=1 waited for it 4 times out of 5, counting 4
    GPU waits for a call that had nothing in flight (dev.stats: a call with nothing submitted to wait for is none)."""
    g = wg.Graph("view_only")
    g.output("y", g.input("x", (4,)).reshape(2, 2))
    prog = g.compile(dev)
    wg.ops.scale(dev.tensor(np.ones(4, np.float32)), 2.0).numpy()   # a submission before: the fence run_many found
    before = dev.stats.snapshot()
    prog.run_many(5, in_flight=1, x=np.arange(4, dtype=np.float32))
    d = dev.stats.since(before)
    assert (d.submits, d.gpu_waits) == (0, 0)
    np.testing.assert_array_equal(prog.run(x=np.arange(4, dtype=np.float32))["y"].numpy(), [[0, 1], [2, 3]])


def test_run_many_encodes_per_submit_replays_in_one_submit(dev):
    """per_submit=4: 10 replays in 3 submits (4, 4, 2), every replay's dispatches encoded, the counter where 10
    separate submits leave it; a program that writes its own input submits each replay alone."""
    prog = _counter(dev)
    before = dev.stats.snapshot()
    prog.run_many(10, in_flight=2, per_submit=4)
    d = dev.stats.since(before)
    assert (d.submits, d.dispatches, d.readbacks, d.gpu_waits) == (3, 20, 0, 1)
    assert prog.state("n").numpy().tolist() == [10.0] * 4 and prog.runs == 10

    g = wg.Graph("append")   # the caches are inputs the program writes: fed afresh before every replay
    kc, vc = g.input("kc", (4, 1, 4), "f32"), g.input("vc", (4, 1, 4), "f32")
    row = g.const("row", np.ones((1, 1, 4), np.float32))
    wg.ops.kv_append((kc, vc), row, row, 1)
    prog = g.compile(dev)
    dev.flush()
    before = dev.stats.snapshot()
    prog.run_many(3, per_submit=3, kc=np.zeros((4, 1, 4), np.float32), vc=np.zeros((4, 1, 4), np.float32))
    assert dev.stats.since(before).submits == 3


# ---- errors ----

def test_add_time_errors_name_the_node(dev):
    g = wg.Graph("bad")
    a = g.input("a", (4,), "f32")
    b = g.input("b", (5,), "f32")
    with pytest.raises(wg.ShapeError, match=r"graph 'bad', node 'add_\d+' \(add\): add: shapes \(4,\) and \(5,\) do not broadcast"):
        wg.ops.add(a, b)
    h = g.input("h", (4,), "f16")
    with pytest.raises(wg.DtypeError, match=r"node 'add_\d+' \(add\).*dtypes f32 and f16 differ"):
        wg.ops.add(a, h)
    with pytest.raises(GraphError, match=r"node 'n1' \(scale\): unknown input 0 \('nope'\)"):
        g.add(wg.graph.Node("n1", "scale", wg.ops.elementwise.ScaleParams(1.0), ("nope", None), ()))
    with pytest.raises(GraphError, match=r"node 'n2' \(scale\): cycle: input 0 \('n2:0'\) is the node's own output"):
        g.add(wg.graph.Node("n2", "scale", wg.ops.elementwise.ScaleParams(1.0), ("n2:0", None), ("n2:0",)))
    with pytest.raises(GraphError, match="unknown op"):
        g.add(wg.graph.Node("n3", "no_such_op", None, ("a",), ()))
    other = wg.Graph("other").input("z", (4,), "f32")
    with pytest.raises(GraphError, match="belongs to graph 'other'"):
        wg.ops.add(a, other)
    with pytest.raises(GraphError, match="must be a value"):
        wg.ops.add(a, dev.tensor(np.ones(4, np.float32)))
    assert len(g) == 3  # none of the failed adds left a node behind


def test_an_empty_out_is_refused_as_the_immediate_op_refuses_it(dev):
    """out=() (or []) in a graph added a node with an output of its own, as if out= were not given, where the op run
    immediately raises ShapeError 'out= has 0 tensors'. It is a ShapeError naming the graph and op now, and adds no
    node; out=(s,) writes s as out=s does."""
    g = wg.Graph("out")
    x, s = g.input("x", (4,), "f32"), g.state("s", (4,))
    for empty in ((), []):
        with pytest.raises(wg.ShapeError, match=rf"^graph 'out', op scale: out={re.escape(repr(empty))} names no value; "
                                                r"give the state value\(s\) the op writes, or leave out= None"):
            wg.ops.scale(x, 2.0, out=empty)
        with pytest.raises(wg.ShapeError, match="out= has 0 tensors"):   # the immediate op's own rule
            wg.ops.scale(dev.tensor(np.ones(4, np.float32)), 2.0, out=empty)
    assert len(g) == 2
    wg.ops.scale(x, 2.0, out=(s,))
    prog = g.compile(dev)
    prog.run(x=np.array([1, 2, 3, 4], np.float32))
    np.testing.assert_array_equal(prog.state("s").numpy(), [2, 4, 6, 8])


def test_out_a_state_the_node_reads_is_refused_when_the_node_is_added(dev):
    """add(s, x, out=s) is refused by the op run immediately (one dispatch would write and bind one buffer again);
    a graph took the node and refused it only at compile, so the graph and its JSON held a node no program could
    run. AliasingError names the graph, node, argument and state when the node is added (a view of s too), and no
    node is left; out= another state, reading s, is fine."""
    g = wg.Graph("alias")
    x, s, t = g.input("x", (4,), "f32"), g.state("s", (4,), init=[1.0, 2.0, 3.0, 4.0]), g.state("t", (4,))
    with pytest.raises(wg.AliasingError, match=r"^graph 'alias', node 'add_\d+' \(add\): a \('s'\) and out= \('s'\) are "
                                               r"one buffer \(the state 's'; views count\)"):
        wg.ops.add(s, x, out=s)
    with pytest.raises(wg.AliasingError, match=r"node 'scale_\d+' \(scale\): x \('reshape_\d+:0'\) and out= \('s'\) "
                                               r"are one buffer \(the state 's'"):
        wg.ops.scale(s.reshape(2, 2).reshape(4), 2.0, out=s)
    S = dev.tensor(np.ones(4, np.float32))
    with pytest.raises(wg.AliasingError, match="are one buffer"):   # the immediate op's own rule
        wg.ops.add(S, S.reshape(2, 2).reshape(4), out=S)
    assert [g.node(n).op for n in g.topological_order()] == ["input", "state", "state", "reshape", "reshape"]
    wg.ops.add(s, x, out=t)
    prog = g.compile(dev)
    prog.run(x=np.full(4, 10, np.float32))
    np.testing.assert_array_equal(prog.state("t").numpy(), [11, 12, 13, 14])


def _nothing_submitted(dev, fn, exc, match):
    before = dev.stats.snapshot()
    with pytest.raises(exc, match=match):
        fn()
    delta = dev.stats.since(before)
    assert delta.submits == 0 and delta.dispatches == 0 and delta.uniform_bytes_written == 0


def test_bad_inputs_at_run_time_submit_nothing(dev):
    g = wg.Graph("io")
    x = g.input("x", (2, 3), "f32")
    p = g.input("pos", (1,), "u32")
    g.output("y", wg.ops.scale(x, 2.0))
    g.output("p", p)
    prog = g.compile(dev)
    ok = np.ones((2, 3), np.float32)
    prog.run(x=ok, pos=1)
    _nothing_submitted(dev, lambda: prog.run(x=ok), GraphError, r"missing inputs \['pos'\]")
    _nothing_submitted(dev, lambda: prog.run(x=ok, pos=1, z=2), GraphError, r"unknown inputs \['z'\]")
    _nothing_submitted(dev, lambda: prog.run(x=np.ones((3, 2), np.float32), pos=1), wg.ShapeError,
                       r"input 'x': expects shape \(2, 3\), got \(3, 2\)")
    _nothing_submitted(dev, lambda: prog.run(x=ok.astype(np.float64), pos=1), wg.DtypeError,
                       r"input 'x': got float64 data; wgraph stores f32, f16, bf16, u32 and i32 and never narrows")
    _nothing_submitted(dev, lambda: prog.run(x=ok.astype(np.float16), pos=1), wg.DtypeError,
                       r"input 'x': expects f32 \(float32\), got an array of float16")
    _nothing_submitted(dev, lambda: prog.run(x=ok, pos=-1), wg.DtypeError, r"input 'pos': -1 is outside u32's range")
    _nothing_submitted(dev, lambda: prog.run(x=ok, pos=1.5), wg.DtypeError, r"1.5 is not an integer")
    other = wg.Device()
    _nothing_submitted(dev, lambda: prog.run(x=other.tensor(ok), pos=1), wg.DeviceError, "belongs to another device")
    # a Tensor input of this device is copied in, in the same submit
    t = dev.tensor(np.full((2, 3), 4, np.float32))
    before = dev.stats.snapshot()
    np.testing.assert_array_equal(prog.run(x=t, pos=3)["y"].numpy(), np.full((2, 3), 8))
    assert dev.stats.since(before).submits == 2  # the run, then the readback


def test_an_input_fed_a_graph_value_names_the_input(dev):
    """prog.run(x=s) with s a graph Value (the state's symbol, where prog.state('s') was meant) raised the Value's own
    GraphError, naming no program or input and telling a caller already running the program to make the value an
    output and compile; it names the input now, and for a state of the program points at prog.state. Nothing runs."""
    g = wg.Graph("val")
    x = g.input("x", (4,), "f32")
    s = g.state("s", (4,), init=np.arange(4, dtype=np.float32))
    g.output("y", wg.ops.add(x, s))
    prog = g.compile(dev)
    for run in (lambda v: prog.run(x=v), lambda v: prog.run_many(1, x=v), lambda v: prog.profile(x=v)):
        _nothing_submitted(dev, lambda: run(s), GraphError, r"^program 'val', input 'x': got Value\('s', .*\), a value of "
                           r"graph 'val', which holds no data; a run takes host data or a Tensor \(this program's "
                           r"buffer of state 's' is prog.state\('s'\)\)$")
    other = wg.Graph("other").input("z", (4,), "f32")
    _nothing_submitted(dev, lambda: prog.run(x=other), GraphError,
                       r"^program 'val', input 'x': got Value\('z', .*\), a value of graph 'other', which holds no data; "
                       r"a run takes host data or a Tensor$")
    out = prog.run(x=prog.state("s"))["y"].numpy()   # what was meant: the state's tensor
    np.testing.assert_array_equal(out, np.arange(4, dtype=np.float64) * 2)


def test_a_state_init_or_const_given_a_graph_value_names_them():
    """g.state('s2', init=v) and g.const('c', v) with v a graph Value raised the Value's own GraphError, naming neither
    the state nor the const; they are named now, and nothing is added."""
    g = wg.Graph("init")
    x = g.input("x", (4,), "f32")
    with pytest.raises(GraphError, match=r"^graph 'init': state 's2' init: got Value\('x', .*\), a value of graph 'init', "
                                         r"which holds no data until a program runs; give host data"):
        g.state("s2", (4,), init=x)
    with pytest.raises(GraphError, match=r"^graph 'init': const 'c': got Value\('x', .*\), a value of graph 'init'"):
        g.const("c", x)
    assert list(g.nx) == ["x"]


def test_an_input_fed_another_inputs_own_buffer_is_refused(dev):
    """Every input of a run is written (host data by a queue write before the submit, a Tensor by a copy at its
    start): a Tensor that is another input's own buffer (prog.state('y')) was read after that input's new value
    landed, so x got y's new value, not the one it held at the call (d = x - y read 0, not 1 - 5 = -4). Refused
    before any GPU work, naming both inputs; an input fed its own buffer is still a no-op, other tensors copy."""
    g = wg.Graph("two")
    x, y = g.input("x", (4,), "f32"), g.input("y", (4,), "f32")
    g.output("d", wg.ops.add(x, wg.ops.scale(y, -1.0)))
    prog = g.compile(dev)
    prog.run(x=np.zeros(4, np.float32), y=np.ones(4, np.float32))
    for fed in (prog.state("y"), prog.state("y").reshape(2, 2).reshape(4)):
        _nothing_submitted(dev, lambda: prog.run(x=fed, y=np.full(4, 5, np.float32)), wg.AliasingError,
                           r"program 'two', input 'x': the tensor given is input 'y''s own buffer")
    np.testing.assert_array_equal(prog.state("y").numpy(), [1, 1, 1, 1])
    held = dev.tensor(prog.state("y").numpy())
    out = prog.run(x=held, y=np.full(4, 5, np.float32))["d"].numpy()
    np.testing.assert_array_equal(out, [-4, -4, -4, -4])
    out = prog.run(x=prog.state("x"), y=np.full(4, 2, np.float32))["d"].numpy()   # x keeps what it holds
    np.testing.assert_array_equal(out, [-1, -1, -1, -1])


def test_program_for_another_device_epoch():
    d = wg.Device()
    g = wg.Graph("epoch")
    g.output("y", wg.ops.scale(g.input("x", (4,), "f32"), 2.0))
    prog = g.compile(d)
    np.testing.assert_array_equal(prog.run(x=np.ones(4, np.float32))["y"].numpy(), [2, 2, 2, 2])
    d.recreate()
    _nothing_submitted(d, lambda: prog.run(x=np.ones(4, np.float32)), wg.DeviceError, "compile the graph again")
    np.testing.assert_array_equal(g.compile(d).run(x=np.ones(4, np.float32))["y"].numpy(), [2, 2, 2, 2])


def test_a_program_runs_its_graph_as_compiled_when_the_graph_grows(dev):
    """Nodes, inputs, outputs and states added to a graph after compile are not the program's: run() asked for the
    new input z (GraphError 'missing inputs') and, given it, raised KeyError 'z'; state('st') and reset_state()
    raised KeyError 'st'; update() of the new node raised KeyError. The program runs as compiled (y = 3x)."""
    g = wg.Graph("grows")
    x = g.input("x", (4,), "f32")
    g.output("y", wg.ops.scale(x, 3.0))
    prog = g.compile(dev)
    z = g.input("z", (4,), "f32")
    g.output("w", wg.ops.scale(z, 2.0))
    g.state("st", (4,))
    xs = np.array([1.0, -2.0, 0.5, 4.0], np.float32)
    out = prog.run(x=xs)
    assert sorted(out) == ["y"]
    np.testing.assert_array_equal(out["y"].numpy(), xs.astype(np.float64) * 3)
    with pytest.raises(GraphError, match=r"unknown inputs \['z'\]; it takes \['x'\] \(\['z'\] added to the graph after "
                       r"it was compiled: compile the graph again to take them\)"):
        prog.run(x=xs, z=xs)
    with pytest.raises(GraphError, match=r"unknown inputs \['q'\]; it takes \['x'\]$"):  # never the graph's: no hint
        prog.run(x=xs, q=xs)
    with pytest.raises(GraphError, match=r"state\(name='st'\): no such state.*\(added to the graph after it was compiled"):
        prog.state("st")
    # reset_state said only 'no such state; states: []' for the state the graph gained (state() gave the hint)
    with pytest.raises(GraphError, match=r"reset_state\(name='st'\): no such state; states: \[\] \(added to the graph after "
                                         r"it was compiled: compile the graph again to take it\)$"):
        prog.reset_state("st")
    with pytest.raises(GraphError, match=r"reset_state\(name='x'\): no such state; states: \[\] \('x' is an input: every "
                                         r"run writes it, there is nothing to refill\)$"):
        prog.reset_state("x")
    # state() takes an input's name too, and said 'states: []' alone, as if it took none
    with pytest.raises(GraphError, match=r"state\(name='q'\): no such state or input; states: \[\], inputs: \['x'\]$"):
        prog.state("q")
    prog.reset_state()
    new_node = g.producer[g.outputs["w"]]
    with pytest.raises(GraphError, match=rf"update\(node_name='{new_node}'\): no such node"):
        prog.update(new_node, wg.ops.elementwise.ScaleParams(5.0))
    np.testing.assert_array_equal(g.compile(dev).run(x=xs, z=xs)["w"].numpy(), xs.astype(np.float64) * 2)


def test_program_dot_draws_the_program_as_compiled_when_the_graph_grows(dev):
    """prog.to_dot() drew the graph as it is now: a node and an output added after compile (which the program
    never runs nor returns) were drawn as its own. It draws the compiled nodes and outputs; the graph's DOT has all."""
    g = wg.Graph("grows")
    x = g.input("x", (4,), "f32")
    y = wg.ops.scale(x, 3.0)
    g.output("y", y)
    prog = g.compile(dev)
    compiled = prog.to_dot()
    g.output("z", wg.ops.silu(y))
    assert prog.to_dot() == compiled
    assert "silu" not in compiled and '"out:z"' not in compiled and '"scale_1" -> "out:y"' in compiled
    assert '"scale_1" -> "silu_2"' in g.to_dot() and '"silu_2" -> "out:z"' in g.to_dot()


def test_compile_names_a_value_past_the_devices_buffer_limit(dev):
    """A graph (file) whose state is (2^32 - 1)^4 f32 feeding two ops: compile raised dev.empty's ArgumentError
    'shape=(340282366604025813516997721482669850625,) must be a shape' for the intermediate's slot, naming neither
    the graph's value nor the limit (a state alone: 'tensor (4294967295, ...) f32 is ... bytes', no value named).
    Now a LimitError naming the value, its bytes and the device's limit, before any buffer is made."""
    g = wg.Graph("huge")
    g.output("y", wg.ops.scale(wg.ops.scale(g.state("kc", (2**32 - 1,) * 4, "f32"), 2.0), 0.5))
    g = wg.Graph.from_json(g.to_json())
    limit = dev.caps.max_storage_binding_size
    before = dev.stats.snapshot()
    with pytest.raises(wg.LimitError, match=rf"graph 'huge': value 'kc' \(f32 \(4294967295, .*\)\) is "
                                            rf"{(2**32 - 1) ** 4 * 4} bytes; the device binds at most {limit} bytes"):
        g.compile(dev)
    assert dev.stats.since(before).buffers_created == 0


def test_run_inside_recording_is_refused(dev):
    g = wg.Graph("rec")
    g.output("y", wg.ops.scale(g.input("x", (4,), "f32"), 2.0))
    prog = g.compile(dev)
    with dev.record():
        with pytest.raises(wg.RecordingError, match="inside dev.record"):
            prog.run(x=np.ones(4, np.float32))


# ---- export ----

def test_json_round_trip_and_dot(dev, rng):
    W, s, d = _weights(rng)
    g = _block_graph(W, s, d)
    text = g.to_json()
    g2 = wg.Graph.from_json(text)
    assert g2.to_json() == text
    assert [g2.node(n) for n in g2.topological_order()] == [g.node(n) for n in g.topological_order()]
    x = rng.standard_normal((s, d)).astype(np.float32)
    a = g.compile(dev).run(x=x, pos=4)["y"].numpy()
    b = g2.compile(dev).run(x=x, pos=4)["y"].numpy()
    assert a.tobytes() == b.tobytes()
    params = [n["params"] for n in json.loads(text)["nodes"] if n["op"] == "rmsnorm"][0]
    assert params == {"__attrs__": "wgraph.ops.norms:RmsNormParams", "fields": {"eps": 1e-6}}
    with pytest.raises(GraphError, match="format"):
        wg.Graph.from_json(json.dumps({"format": "x"}))
    dot = g.to_dot()
    assert dot.startswith('digraph "block"') and '"rmsnorm_1" -> "linear_2"' in dot and "f32[3,32]" in dot
    pdot = g.compile(dev).to_dot()
    assert f"{_gemv_r8(dev)} {_gemv_r8_workgroups(32, dev)}x1x1" in pdot and "slot" in pdot


def test_a_file_with_the_retired_two_node_kvcache_append_says_what_replaced_it():
    """Graph files once held attention_kvcache with k_new / v_new as two nodes (attention_kvcache_append, then the
    attention): the op is gone (one attention_kvcache_new_rows node checks seqlen_add against its k_new), and such
    a file is refused naming the op and what replaced it, not as an unknown op among the registered ones."""
    g = wg.Graph("old")
    g.output("y", wg.ops.scale(g.input("x", (4,), "f32"), 2.0))
    data = json.loads(g.to_json())
    data["nodes"][1]["op"] = "attention_kvcache_append"
    with pytest.raises(GraphError, match=r"node 'scale_1': op 'attention_kvcache_append' is no longer read: "
                                         r"attention_kvcache with k_new / v_new is one attention_kvcache_new_rows node"):
        wg.Graph.from_json(json.dumps(data))


def test_dot_edge_of_two_values_breaks_the_label_line():
    """An edge carrying two values (add_rmsnorm's sum and normed, both into one add) labels them one per line,
    as the node labels do (a raw newline, a line break to Graphviz). It was written "\\n" and then escaped again,
    so Graphviz got an escaped backslash and showed the text \\n between the two values."""
    g = wg.Graph("two")
    x = g.input("x", (2, 4), "f32")
    s, n = wg.ops.add_rmsnorm(x, x, g.const("w", np.ones(4, np.float32)))
    g.output("y", wg.ops.add(s, n))
    edge = [line for line in g.to_dot().split(";") if '"add_rmsnorm_1" -> "add_2"' in line]
    assert edge == ['\n  "add_rmsnorm_1" -> "add_2" [label="add_rmsnorm_1:0 f32[2,4]\nadd_rmsnorm_1:1 f32[2,4]"]']


def test_dot_output_nodes_are_not_merged_with_nodes_of_the_same_id():
    """An output's DOT node was "out:<name>": an input named "out:y" and an output "y" were one DOT node (the
    input's box restyled as the output, the output's edge a loop on it); outputs "y" and "out:y" likewise."""
    import networkx as nx

    g = wg.Graph("ids")
    x = g.input("out:y", (4,), "f32")
    g.output("y", wg.ops.scale(x, 2.0))
    g.output("out:y", x)
    dot = g.to_dot()
    # the DOT read back as a graph (its ids are quoted names without escapes here): 2 graph nodes, 2 output nodes
    ids = re.findall(r'^  "([^"]*)" \[label=', dot, re.M)
    edges = re.findall(r'^  "([^"]*)" -> "([^"]*)"', dot, re.M)
    assert len(ids) == len(set(ids)) == 4
    read = nx.DiGraph(edges)
    assert read.number_of_nodes() == 4 and nx.is_directed_acyclic_graph(read)
    assert sorted(d for _, d in read.out_degree()) == [0, 0, 1, 2]   # the input feeds scale and an output


def _scale_graph_json(params_name="wgraph.ops.elementwise:ScaleParams"):
    g = wg.Graph("j")
    x = g.input("x", (4,), "f32")
    g.output("y", wg.ops.scale(x, 2.0))
    data = json.loads(g.to_json())
    node = [n for n in data["nodes"] if n["op"] == "scale"][0]
    node["params"]["__attrs__"] = params_name
    return json.dumps(data)


@pytest.mark.parametrize("name", ["this:nothing", "os:system", "subprocess:Popen", "wgraph.ops.core:OpDef",
                                  "wgraph.ops.attention_planner:KernelPlan", 7])
def test_from_json_builds_only_wgraph_param_classes(name):
    import sys

    text = _scale_graph_json(name)
    had_this = "this" in sys.modules
    with pytest.raises(GraphError, match="is not one of wgraph's op param classes"):
        wg.Graph.from_json(text)
    assert ("this" in sys.modules) == had_this  # nothing named by the file was imported
    assert wg.Graph.from_json(_scale_graph_json()).to_json()  # the real class still loads


def test_from_json_checks_state_init_bytes(dev):
    g = wg.Graph("s")
    st = g.state("pos", (4,), "u32", init=np.arange(4, dtype=np.uint32))
    g.output("y", st)
    data = json.loads(g.to_json())
    node = [n for n in data["nodes"] if n["op"] == "state"][0]
    assert wg.Graph.from_json(json.dumps(data)).compile(dev).state("pos").numpy().tolist() == [0, 1, 2, 3]
    node["init"] = base64.b64encode(bytes(8)).decode()  # 2 of the 4 values: the rest would be stale pool data
    with pytest.raises(GraphError, match=r"state 'pos' is \(4,\) u32 \(16 bytes\); its init holds 8 bytes"):
        wg.Graph.from_json(json.dumps(data))
    node["init"] = "not base64!"
    with pytest.raises(GraphError, match="init is not base64"):
        wg.Graph.from_json(json.dumps(data))


def test_from_json_checks_what_the_builder_checks(dev):
    """A graph file is held to the builder's rules: out= only into a state (a write into an intermediate was
    ignored by the memory plan and landed in a slot another value held: a wrong output), every param by its
    op's rule (rope's interleaved="x" raised ValueError at compile), params nested past Python's recursion."""
    g = wg.Graph("w")
    x = g.input("x", (4,), "f32")
    a = wg.ops.scale(x, 2.0)
    w = wg.ops.scale(x, 7.0)
    g.output("d", wg.ops.scale(wg.ops.scale(a, 3.0), 5.0))
    g.output("w", w)
    data = json.loads(g.to_json())
    writer = [n for n in data["nodes"] if n["op"] == "scale" and n["params"]["fields"]["factor"] == 7.0][0]
    writer["writes"], writer["outputs"] = [a.name], []
    del data["outputs"]["w"]
    with pytest.raises(GraphError, match=rf"out= value '{re.escape(a.name)}' is not a state"):
        wg.Graph.from_json(json.dumps(data))

    cos, sin = (np.ones((8, 4), np.float32),) * 2
    r = wg.Graph("r")
    q = r.input("q", (1, 2, 8), "f32")
    r.output("y", wg.ops.rope(q, r.const("cos", cos), r.const("sin", sin), pos=0))
    data = json.loads(r.to_json())
    [n for n in data["nodes"] if n["op"] == "rope"][0]["params"]["fields"]["interleaved"] = "x"
    with pytest.raises(wg.ArgumentError, match=r"rope: interleaved='x' must be"):
        wg.Graph.from_json(json.dumps(data))


def test_ops_added_to_a_graph_read_from_json_take_free_names():
    """A graph read from a file numbers its next ops from its node count, which its names need not follow (ops
    whose infer refused them still took a number, as a hand-written file may name its nodes anything): a new op
    took the name of an existing node, a GraphError. Now it takes the next free one."""
    g = wg.Graph("n")
    x = g.input("x", (4,), "f32")
    for _ in range(3):
        with pytest.raises(wg.ShapeError):
            wg.ops.reshape(x, (5,))
    g.output("y", wg.ops.silu(x))
    again = wg.Graph.from_json(g.to_json())
    assert list(again.nx) == ["x", "silu_4"]
    y = wg.ops.silu(wg.ops.silu(again.values["x"]))
    assert len(again) == 4 and y.name in again.values


def test_an_input_named_as_an_ops_output_leaves_the_op_a_free_name(dev):
    """An input named "scale_1:0" (TensorFlow's spelling of a first output) is the default name of the first scale's
    output: wg.ops.scale on it raised GraphError "output 'scale_1:0' is already a value of the graph". The op's
    node now takes the next free name, and the graph runs as any other."""
    g = wg.Graph("tf")
    x = g.input("scale_1:0", (4,), "f32")
    y = wg.ops.scale(x, 2.0)
    assert y.name != x.name and g.producer[y.name] != "scale_1"
    g.output("y", y)
    xs = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    np.testing.assert_array_equal(g.compile(dev).run(**{"scale_1:0": xs})["y"].numpy(), [2.0, -4.0, 1.0, 6.0])


def test_from_json_names_params_nested_too_deep(monkeypatch):
    """Params nested deeper than Python's recursion (about 700 levels pass json.loads outside pytest, then
    decoding them recursed): a GraphError naming the node, not a RecursionError."""
    from wgraph.graph import export

    def recurse(x):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(export, "_dec", recurse)
    with pytest.raises(GraphError, match=r"node 'scale_1'.*: its params nest deeper than Python decodes"):
        wg.Graph.from_json(_scale_graph_json())


# ---- decode loop: 64 steps replayed vs 64 immediate steps ----

HQ, HKV, D, DM, CAP = 4, 2, 8, 32, 64


def _decode_layer(x, pos, kv_len, kc, vc, w, cos, sin):
    """One pre-norm attention block for one token: works on Values (a graph) and Tensors (immediate)."""
    h = wg.ops.rmsnorm(x, w["norm"])
    q = wg.ops.rope(wg.ops.reshape(wg.ops.linear(h, w["wq"]), 1, HQ, D), cos, sin, pos=pos)
    k = wg.ops.rope(wg.ops.reshape(wg.ops.linear(h, w["wk"]), 1, HKV, D), cos, sin, pos=pos)
    v = wg.ops.reshape(wg.ops.linear(h, w["wv"]), 1, HKV, D)
    wg.ops.kv_append((kc, vc), k, v, pos)
    o = wg.ops.attention(q, kc, vc, causal=True, kv_len=kv_len)
    return wg.ops.add(x, wg.ops.linear(wg.ops.reshape(o, 1, HQ * D), w["wo"]))


def test_decode_loop_64_steps_replay_equals_immediate(dev, rng):
    w = {"norm": rng.standard_normal(DM).astype(np.float32),
         "wq": rng.standard_normal((HQ * D, DM)).astype(np.float32) * 0.3,
         "wk": rng.standard_normal((HKV * D, DM)).astype(np.float32) * 0.3,
         "wv": rng.standard_normal((HKV * D, DM)).astype(np.float32) * 0.3,
         "wo": rng.standard_normal((DM, HQ * D)).astype(np.float32) * 0.3}
    cos, sin = wg.ops.rope_tables(CAP, D)
    g = wg.Graph("decode")
    x = g.input("x", (1, DM), "f32")
    pos = g.input("pos", (1,), "u32")
    kv_len = g.input("kv_len", (1,), "u32")
    kc, vc = g.state("k_cache", (CAP, HKV, D)), g.state("v_cache", (CAP, HKV, D))
    cw = {k: g.const(k, v) for k, v in w.items()}
    g.output("y", _decode_layer(x, pos, kv_len, kc, vc, cw, g.const("cos", cos), g.const("sin", sin)))
    # kv_append writes both caches in place (one node): attention, which reads them, is ordered after it
    order = g.topological_order()
    appends = [i for i, n in enumerate(order) if n.startswith("kv_append")]
    assert len(appends) == 1 and max(appends) < next(i for i, n in enumerate(order) if n.startswith("attention"))
    prog = g.compile(dev)
    assert "attention" in prog.explain()

    t = {k: dev.tensor(v) for k, v in w.items()}
    tcos, tsin = dev.tensor(cos), dev.tensor(sin)
    ikc, ivc = dev.tensor(np.zeros((CAP, HKV, D), np.float32)), dev.tensor(np.zeros((CAP, HKV, D), np.float32))
    ipos, ilen = dev.tensor(np.zeros(1, np.uint32)), dev.tensor(np.zeros(1, np.uint32))
    xs = rng.standard_normal((64, 1, DM)).astype(np.float32)
    created = []
    replayed, immediate = [], []
    for step in range(64):
        before = dev.stats.snapshot()
        out = prog.run(x=xs[step], pos=step, kv_len=step + 1)
        delta = dev.stats.since(before)
        assert delta.submits == 1 and delta.uniform_bytes_written == 0
        created.append((delta.pipelines_created, delta.bind_groups_created, delta.buffers_created))
        replayed.append(out["y"].numpy())
        dev.write(ipos, np.array([step], np.uint32))
        dev.write(ilen, np.array([step + 1], np.uint32))
        immediate.append(_decode_layer(dev.tensor(xs[step]), ipos, ilen, ikc, ivc, t, tcos, tsin).numpy())
    assert all(c == (0, 0, 0) for c in created)
    assert np.stack(replayed).tobytes() == np.stack(immediate).tobytes()
    assert prog.state("k_cache").numpy().tobytes() == ikc.numpy().tobytes()
    # and the immediate path itself is right: the last step against float64 numpy over the 64 cached rows
    kc64, vc64 = ikc.numpy().astype(np.float64), ivc.numpy().astype(np.float64)
    x64 = xs[63].astype(np.float64)
    h = x64 / np.sqrt(np.mean(x64 ** 2) + 1e-6) * w["norm"]
    q = (h @ w["wq"].T.astype(np.float64)).reshape(HQ, D)
    c, s = cos[63].astype(np.float64), sin[63].astype(np.float64)
    q = np.concatenate([q[:, :4] * c - q[:, 4:] * s, q[:, 4:] * c + q[:, :4] * s], -1)
    scores = np.einsum("hd,lhd->hl", q, np.repeat(kc64, HQ // HKV, axis=1)) / np.sqrt(D)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = np.einsum("hl,lhd->hd", p, np.repeat(vc64, HQ // HKV, axis=1)).reshape(1, HQ * D)
    np.testing.assert_allclose(replayed[-1], x64 + o @ w["wo"].T.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_state_init_must_have_the_states_shape():
    """init fills the state as it is: a (3, 2) array for a (2, 3) state (or a flat (6,)) is refused, never
    reinterpreted; the state's own shape is taken."""
    g = wg.Graph("init")
    for shape in ((3, 2), (6,)):
        with pytest.raises(wg.ShapeError, match=rf"state 's' is \(2, 3\); init has shape {re.escape(str(shape))} \(it "
                                                 r"must have the state's shape\)"):
            g.state("s", (2, 3), init=np.arange(6, dtype=np.float32).reshape(shape))
    assert g.state("s", (2, 3), init=np.arange(6, dtype=np.float32).reshape(2, 3)).spec.shape == (2, 3)


def test_a_number_inits_a_one_element_state(dev):
    """g.state("pos", (1,), "u32", init=5) was a ShapeError (init of shape ()), while prog.run(pos=5) and
    dev.write take a number for a one-element value (README: g.state's init takes Python numbers)."""
    g = wg.Graph("scalar_init")
    pos = g.state("pos", (1,), "u32", init=5)
    s = g.state("s", (1, 1), "f32", init=2.5)
    g.output("y", wg.ops.scale(s, 2.0))
    prog = g.compile(dev)
    assert pos.spec.shape == (1,) and prog.state("pos").numpy().tolist() == [5]
    assert prog.run()["y"].numpy().tolist() == [[5.0]]
    with pytest.raises(wg.ShapeError, match=r"state 't' is \(2,\); init has shape \(\)"):
        g.state("t", (2,), "u32", init=5)   # a number fills one element, not two


def _accumulator(dev):
    """A program whose run adds x into state s (init 0, 1, 2, 3) and returns the sum."""
    g = wg.Graph("acc")
    s = g.state("s", (4,), init=np.arange(4, dtype=np.float32))
    total = wg.ops.add(s, g.input("x", (4,), "f32"))
    wg.ops.scale(total, 1.0, out=s)
    g.output("total", total)
    return g.compile(dev)


def test_reset_state_keeps_its_place_among_recorded_and_pending_ops(dev):
    """reset_state() inside dev.record() was a queue write made at the call, so it landed before the ops recorded
    ahead of it: scale(prog.state('s')) recorded before the reset read the reset [0, 1, 2, 3], not the [10, 11,
    12, 13] the run had left. It keeps its place now, as dev.write does (recorded, pending or queued)."""
    prog = _accumulator(dev)
    prog.run(x=np.full(4, 10, np.float32))
    with dev.record():
        before = wg.ops.scale(prog.state("s"), 1.0)
        prog.reset_state("s")
        after = wg.ops.scale(prog.state("s"), 1.0)
    np.testing.assert_array_equal(before.numpy(), [10, 11, 12, 13])
    np.testing.assert_array_equal(after.numpy(), [0, 1, 2, 3])
    prog.run(x=np.full(4, 5, np.float32))
    pending = wg.ops.scale(prog.state("s"), 1.0)   # an immediate op, waiting in the pending list
    prog.reset_state()
    np.testing.assert_array_equal(pending.numpy(), [5, 6, 7, 8])
    np.testing.assert_array_equal(prog.state("s").numpy(), [0, 1, 2, 3])


def test_reset_state_after_the_device_is_lost_or_recreated_is_a_device_error():
    """reset_state() on a destroyed device raised wgpu's GPUValidationError ('Parent device is lost'), after
    dev.recreate() another one ('Device ... of Queue ... doesn't match Device ... of Buffer'): a DeviceError now,
    as run() raises, and the new device works on."""
    d = wg.Device()
    prog = _accumulator(d)
    d.destroy()
    with pytest.raises(wg.DeviceError, match=r"program 'acc': reset_state\(\).*epoch \d+; the device is now lost"):
        prog.reset_state()
    d.recreate()
    with pytest.raises(wg.DeviceError, match=r"program 'acc': reset_state\(\).*the device is now epoch \d+: compile"):
        prog.reset_state("s")
    np.testing.assert_array_equal(_accumulator(d).run(x=np.ones(4, np.float32))["total"].numpy(), [1, 2, 3, 4])


def test_host_data_for_an_op_input_in_a_graph_points_to_g_const(dev):
    """A graph's op given host ids was told to upload them with dev.tensor, which a graph cannot take either."""
    g = wg.Graph("host-ids")
    table = g.input("table", (10, 4))
    with pytest.raises(wg.errors.ShapeError, match=r"ids must be a Tensor .*in a graph: g.const\(name, data\)"):
        wg.ops.embedding(np.array([1, 2], np.uint32), table)
