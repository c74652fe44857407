"""The one capture path (scheduler/commands.py): writes ordered with recorded ops, discarded recordings'
outputs unusable, Program.update of a split-K kv_len, scratch in the program's memory plan, planning without
re-parsing WGSL, the encode's own plan in explain(), and deferred destruction bounded without readbacks."""

import numpy as np
import pytest

import wgraph as wg
from attention_reference import tolerance_check
from kernel_support import skip_unless_runs
from wgraph.errors import RecordingError
from wgraph.graph import GraphError
from wgraph.ops.core import OpDef, register
from wgraph.scheduler.dispatch import Dispatch


def test_write_inside_a_recording_keeps_its_order(dev):
    x = dev.tensor(np.ones(4, np.float32))
    with dev.record():
        y = wg.ops.scale(x, 2.0)
        dev.write(x, np.full(4, 100.0, np.float32))
        z = wg.ops.scale(x, 3.0)
    assert y.numpy().tolist() == [2.0] * 4          # read x before the write
    assert z.numpy().tolist() == [300.0] * 4        # read x after it
    assert x.numpy().tolist() == [100.0] * 4


def test_a_recording_may_write_more_than_one_tensor_holds(dev, monkeypatch):
    """Writes after a recording's first op are staged in upload tensors; one of them all was a tensor of their
    sum, which past the device's tensor size limit raised LimitError naming that internal tensor (a recording
    writing more than 128 MiB on lavapipe). They go in as few tensors as the limit allows now, each write at
    its place in the order. (The limit is lowered to 1 MiB here so the test stays small.)"""
    import attrs

    limit = 1 << 20
    monkeypatch.setattr(dev, "caps", attrs.evolve(dev.caps, max_storage_binding_size=limit))
    monkeypatch.setattr(dev.scheduler, "max_tensor_bytes", limit, raising=False)
    n = limit // 4 * 3 // 5   # f32 elements: each write is 60% of the limit, two do not fit one upload
    a, b = dev.empty((n,), "f32"), dev.empty((n,), "f32")
    x = dev.tensor(np.array([1.0, -3.0], np.float32))
    with dev.record():
        y = wg.ops.scale(x, 2.0)
        dev.write(a, np.full(n, 1.5, np.float32))
        dev.write(b, np.arange(n, dtype=np.float32))
        z = wg.ops.add(a, b)   # reads both writes: they landed before it
    np.testing.assert_array_equal(y.numpy(), [2.0, -6.0])
    np.testing.assert_array_equal(z.numpy(), np.arange(n, dtype=np.float32) + np.float32(1.5))


def test_gpu_kv_len_rewritten_between_recorded_calls(dev, rng):
    q = rng.standard_normal((1, 4, 16)).astype(np.float32)
    k = rng.standard_normal((40, 2, 16)).astype(np.float32)
    v = rng.standard_normal((40, 2, 16)).astype(np.float32)
    tq, tk, tv = dev.tensor(q), dev.tensor(k), dev.tensor(v)
    n = dev.tensor(np.array([7], np.uint32))
    before = dev.stats.snapshot()
    with dev.record():
        a = wg.ops.attention(tq, tk, tv, causal=True, kv_len=n)
        dev.write(n, np.array([33], np.uint32))
        b = wg.ops.attention(tq, tk, tv, causal=True, kv_len=n)
    assert dev.stats.since(before).submits == 1
    for got, length in ((a, 7), (b, 33)):
        ok, err, base, bound = tolerance_check(got.numpy(), q, k, v, out_dtype=np.float32, causal=True, kv_len=length)
        assert ok, (length, err, bound)


def test_discarded_recording_poisons_its_outputs(dev):
    x = dev.tensor(np.arange(4, dtype=np.float32))
    keep = wg.ops.scale(x, 1.0)
    with pytest.raises(ZeroDivisionError):
        with dev.record(label="my step") as rec:
            o = wg.ops.scale(x, 2.0)
            view = o.reshape(2, 2)
            wg.ops.scale(x, 5.0, out=keep)   # a caller's out= tensor keeps its old contents
            1 / 0
    assert rec.state == "discarded"
    with pytest.raises(RecordingError, match="my step.*discarded"):
        o.numpy()
    with pytest.raises(RecordingError, match="my step"):
        view.numpy()
    with pytest.raises(RecordingError, match="my step"):
        wg.ops.scale(o, 1.0)
    assert keep.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    with dev.record():                         # a later recording's outputs are fine
        fine = wg.ops.scale(x, 2.0)
    assert fine.numpy().tolist() == [0.0, 2.0, 4.0, 6.0]


# The split-K decode these tests are about (a group of 2 q heads a kv head: g4), named where a test needs it: a GPU
# with subgroups plans decode_single (one dispatch, no scratch) up to 512 keys and decode_fused past them.
SPLITK = "decode_splitk_g4_f32"


def _decode_graph(capacity, hq, hkv, d, kv_len, variant=None):
    g = wg.Graph("decode")
    q = g.input("q", (1, hq, d), "f32")
    k = g.input("k", (capacity, hkv, d), "f32")
    v = g.input("v", (capacity, hkv, d), "f32")
    g.output("out", wg.ops.attention(q, k, v, causal=True, kv_len=kv_len, variant=variant))
    return g


def test_update_kv_len_of_split_k_decode(dev, rng):
    skip_unless_runs(dev, SPLITK)   # split-K decode: 16.5 KB of workgroup memory
    hq, hkv, d, cap = 8, 2, 32, 600
    q = rng.standard_normal((1, hq, d)).astype(np.float32)
    k = rng.standard_normal((cap, hkv, d)).astype(np.float32)
    v = rng.standard_normal((cap, hkv, d)).astype(np.float32)
    prog = _decode_graph(cap, hq, hkv, d, kv_len=5, variant=SPLITK).compile(dev)
    assert prog.rows[0].variant == SPLITK
    node = prog.rows[0].node
    params = prog.graph.node(node).params
    for length in (5, 600, 1, 260, 64):
        prog.update(node, wg.ops.AttentionParams(**{**_fields(params), "kv_len": length}))
        before = dev.stats.snapshot()
        out = prog.run(q=q, k=k, v=v)["out"]
        delta = dev.stats.since(before)
        got = out.numpy()
        assert delta.submits == 1 and delta.buffers_created == 0
        ok, err, base, bound = tolerance_check(got, q, k, v, out_dtype=np.float32, causal=True, kv_len=length)
        assert ok, (length, err, bound)
    # a param that needs other kernels names itself
    with pytest.raises(GraphError, match=r"variant.*compile the graph again"):
        prog.update(node, wg.ops.AttentionParams(**{**_fields(params), "variant": "decode_streaming_f32"}))
    # the same variant with other compiled-in constants (the k/v layout) shows them
    with pytest.raises(GraphError, match=r"kv_layout\) need kernels \['decode_splitk_g4_f32\(.*KV_RING=True.*\)', "
                                         r".*instead of \['decode_splitk_g4_f32\(.*KV_RING=False.*\)'"):
        prog.update(node, wg.ops.AttentionParams(**{**_fields(params), "kv_layout": "ring"}))
    with pytest.raises(GraphError, match=r"update\(\): params must be the node's class AttentionParams, got ScaleParams"):
        prog.update(node, wg.ops.elementwise.ScaleParams(1.0))


def _fields(params):
    import attrs

    return attrs.asdict(params, recurse=False)


def test_split_k_scratch_is_in_the_memory_plan(dev):
    prog = _decode_graph(600, 8, 2, 32, kv_len=600).compile(dev)
    m = prog.memory
    # part_ml [Hq * chunks * 2] and part_acc [Hq * chunks * D] f32, chunks = the plan's max_chunks
    plan = wg.ops.attention_plan(wg.TensorSpec((1, 8, 32), "f32"), wg.TensorSpec((600, 2, 32), "f32"),
                                 wg.TensorSpec((600, 2, 32), "f32"), causal=True, caps=dev.caps)
    want = 8 * plan.max_chunks * 2 * 4 + 8 * plan.max_chunks * 32 * 4
    assert (m.scratch_requests, m.scratch_buffers, m.scratch_bytes) == (2, 2, want)
    text = prog.explain(full=True)
    assert "scratch: 2 requests in 2 shared buffers" in text
    short = prog.explain()   # the default view says it in words, within 100 columns
    assert "2 temporary buffers of split passes share 2" in " ".join(short.split())
    assert "attention.part_acc" in {w for r in prog.rows for w in r.writes}


def test_scratch_of_two_nodes_shares_buffers(dev):
    g = wg.Graph("two")
    q = g.input("q", (1, 8, 32), "f32")
    k, v = g.input("k", (600, 2, 32), "f32"), g.input("v", (600, 2, 32), "f32")
    a = wg.ops.attention(q, k, v, causal=True, kv_len=600)
    g.output("out", wg.ops.attention(a, k, v, causal=True, kv_len=300))
    m = g.compile(dev).memory
    assert m.scratch_requests == 4 and m.scratch_buffers == 2 and m.scratch_bytes < m.scratch_naive_bytes


def test_planning_reads_no_wgsl(dev, monkeypatch):
    from wgraph.kernels import wgsl

    q = wg.TensorSpec((1, 32, 128), "f16")
    kv = wg.TensorSpec((4096, 8, 128), "f16")
    caps = wg.Caps.synthetic(has_f16=True)   # planning only: any device, shader-f16 or not
    wg.ops.attention_plan(q, kv, kv, causal=True, caps=caps)  # the registry is loaded by now

    def no_parsing(*a, **k):
        raise AssertionError("planning parsed WGSL")

    monkeypatch.setattr(wgsl, "parse_consts", no_parsing)
    plan = wg.ops.attention_plan(q, kv, kv, causal=True, caps=caps)
    assert plan.max_chunks > 0


def test_explain_uses_the_plan_of_the_encode(dev, monkeypatch):
    import sys

    attention_module = sys.modules["wgraph.ops.attention"]  # wg.ops.attention is the function

    calls = []
    real = attention_module.plan
    monkeypatch.setattr(attention_module, "plan", lambda *a, **k: calls.append(1) or real(*a, **k))
    g = wg.Graph("one")
    q = g.input("q", (4, 4, 16), "f32")
    k, v = g.input("k", (20, 2, 16), "f32"), g.input("v", (20, 2, 16), "f32")
    n = g.input("n", (1,), "u32")
    g.output("out", wg.ops.attention(q, k, v, causal=True, kv_len=n))
    prog = g.compile(dev)
    assert len(calls) == 1  # planned once, by the encode; explain() did not plan again
    want = wg.ops.attention_plan(wg.TensorSpec((4, 4, 16), "f32"), wg.TensorSpec((20, 2, 16), "f32"),
                                 wg.TensorSpec((20, 2, 16), "f32"), causal=True,
                                 kv_len=wg.TensorSpec((1,), "u32"), caps=dev.caps)
    assert prog.rows[0].reason == want.reason and want.reason in prog.explain(full=True)


def test_a_new_view_op_needs_no_graph_code(dev):
    from wgraph.tensor import TensorSpec

    def infer(params, specs):
        (x,) = specs
        return (TensorSpec((x.size,), x.dtype),)

    flat = OPS_FLAT if (OPS_FLAT := _registered("test_flatten")) else register(
        OpDef("test_flatten", infer, lambda *a: [], is_view=True))
    from wgraph.ops.core import apply

    g = wg.Graph("views")
    x = g.input("x", (2, 3), "f32")
    y = apply(flat, None, (wg.ops.scale(x, 2.0),))
    g.output("y", wg.ops.scale(y, 1.0))
    prog = g.compile(dev)
    view_value = prog.graph.node(prog.graph.producer[y.name]).outputs[0]
    assert prog.tensors[view_value].buffer is prog.tensors[prog.graph.node("scale_1").outputs[0]].buffer
    assert prog.run(x=np.arange(6, dtype=np.float32).reshape(2, 3))["y"].numpy().tolist() == [0, 2, 4, 6, 8, 10]


def _registered(name):
    from wgraph.ops.core import OPS

    return OPS.get(name)


def test_out_into_a_state_writes_in_place_every_run(dev):
    g = wg.Graph("last")
    x = g.input("x", (4,), "f32")
    last = g.state("last", (4,), "f32")
    g.output("before", wg.ops.scale(last, 1.0))          # added before the write: reads the previous run's
    wg.ops.scale(x, 2.0, out=last)                       # last = 2x, in place, every run
    g.output("after", wg.ops.scale(last, 1.0))           # ordered after the write
    prog = g.compile(dev)
    prev = np.zeros(4, np.float32)
    for i in range(3):
        a = np.full(4, float(i + 1), np.float32)
        out = prog.run(x=a)
        assert out["before"].numpy().tolist() == prev.tolist()
        assert out["after"].numpy().tolist() == (2 * a).tolist()
        prev = 2 * a
    with pytest.raises(GraphError, match="not a state"):
        g2 = wg.Graph("bad")
        a = g2.input("a", (4,), "f32")
        wg.ops.scale(a, 2.0, out=a)


def test_deferred_destruction_is_bounded_without_readbacks():
    from wgraph.scheduler.queue import PENDING_ITEMS

    dev = wg.Device()
    dev.pool.budget_bytes = 1 << 20                   # a small free list, so releases go to destruction
    dev.pool.deferred_budget_bytes = 4 << 20
    x = dev.tensor(np.ones(1024, np.float32))
    start = dev.stats.snapshot()
    peak_live, peak_deferred = 0, 0
    for i in range(2000):
        n = 1024 * (1 + i % 61)                       # 61 sizes: the free list cannot serve them all
        wg.ops.scale(dev.empty((n,), "f32"), 2.0)     # never read
        peak_live = max(peak_live, dev.stats.live_buffers)
        peak_deferred = max(peak_deferred, dev.pool.deferred_bytes)
    d = dev.stats.since(start)
    assert d.readbacks == 0 and d.gpu_waits > 0
    # the budget, plus what one flush of pending ops can release past it (each op: an input and an output)
    assert peak_deferred <= (4 << 20) + PENDING_ITEMS * 2 * 61 * 4096
    assert peak_live < 400, peak_live
    dev.destroy()


def test_a_list_that_fails_to_prepare_gives_its_uniform_buffer_back(dev, monkeypatch):
    """A recording's or a program's uniform arena is a pool buffer taken before its kernels compile and its upload
    buffers are made; when either raised (a kernel the driver cannot compile, an upload past the memory), the arena
    never went back to the pool: 2 buffers more in use (stats.live_buffers, not in the free list) per failed
    recording and compile, for good."""
    import gc

    x = dev.tensor(np.ones(4, np.float32))
    g = wg.Graph("fails_to_prepare")
    a = g.input("a", (4,), "f32")
    g.output("y", wg.ops.scale(wg.ops.add(a, a), 2.0))

    def failing(kernels, *args, **kwargs):
        raise wg.PlanError("the driver could not compile it")

    def attempt():
        with pytest.raises(wg.PlanError, match="could not compile"):
            with dev.record():
                wg.ops.add(wg.ops.scale(x, 2.0), x)   # two uniform slices: an arena from the pool
        with pytest.raises(wg.PlanError, match="could not compile"):
            g.compile(dev)

    def in_use():
        gc.collect()
        return dev.stats.live_buffers - dev.pool.free_count - len(dev.pool._doomed)

    monkeypatch.setattr(dev.pipelines, "warm", failing)
    attempt()   # the pool has buffers of these sizes from here on
    before = in_use()
    for _ in range(5):
        attempt()
    assert in_use() == before


def test_an_op_whose_scratch_waits_for_the_gpu_is_still_submitted(rng):
    """A first-time split-K decode's scratch allocation past the deferred-destruction budget waited for the GPU in
    the middle of the call's append: the pending list went to the GPU half-appended and the rest of the call was
    never submitted (its output kept a recycled buffer's contents). The wait now comes before or after."""
    dev = wg.Device()
    dev.pool.budget_bytes = 0                          # every release goes to destruction: the wait is due
    dev.pool.deferred_budget_bytes = 0
    k, v = (rng.standard_normal((256, 2, 16)).astype(np.float32) for _ in range(2))
    tk, tv = dev.tensor(k), dev.tensor(v)
    for _ in range(5):
        q = rng.standard_normal((1, 4, 16)).astype(np.float32)
        junk = dev.tensor(np.full((1, 4, 16), 1234.0, np.float32))
        junk.numpy()
        del junk                                       # a buffer the output could be given, holding 1234s
        out = wg.ops.attention(dev.tensor(q), tk, tv, causal=True, variant=SPLITK)   # scratch on every device
        ok, err, _, bound = tolerance_check(out.numpy(), q, k, v, out_dtype=np.float32, causal=True)
        assert ok, (err, bound)
    assert not dev.scheduler.pending
    dev.destroy()


def test_a_repeated_call_fills_its_template(dev, rng):
    a = rng.standard_normal(300).astype(np.float32)
    x, y = dev.tensor(a), dev.tensor(2 * a)
    first = wg.ops.add(x, y).numpy()
    n = len(dev.templates)
    before = dev.stats.snapshot()
    for _ in range(3):  # the same op, params and shapes on other tensors: the template, no new entry
        x2, y2 = dev.tensor(a + 1), dev.tensor(a - 1)
        np.testing.assert_array_equal(wg.ops.add(x2, y2).numpy(), (a + 1) + (a - 1))
    assert len(dev.templates) == n and dev.stats.since(before).pipelines_created == 0
    np.testing.assert_array_equal(first, a + 2 * a)
    with pytest.raises(wg.AliasingError):   # the template path still refuses an aliased out=
        wg.ops.add(x, y, out=x)
    with pytest.raises(wg.ShapeError):
        wg.ops.add(x, y, out=dev.empty((299,), "f32"))


@pytest.mark.parametrize("mode", ["recorded", "immediate"])
def test_repeated_split_k_calls_share_scratch_in_one_list(dev, rng, mode):
    """A split-K decode's partial buffers are shared by the calls of one command list (the queue runs them
    one after another); every call still gets its own right answer."""
    skip_unless_runs(dev, SPLITK)   # split-K decode: 16.5 KB of workgroup memory
    k = rng.standard_normal((256, 2, 16)).astype(np.float32)
    v = rng.standard_normal((256, 2, 16)).astype(np.float32)
    qs = [rng.standard_normal((1, 4, 16)).astype(np.float32) for _ in range(4)]
    tk, tv = dev.tensor(k), dev.tensor(v)
    tqs = [dev.tensor(q) for q in qs]
    wg.ops.attention(tqs[0], tk, tv, causal=True, variant=SPLITK).numpy()  # the template
    dev.flush()
    before = dev.stats.snapshot()
    if mode == "recorded":
        with dev.record() as rec:
            outs = [wg.ops.attention(q, tk, tv, causal=True, variant=SPLITK) for q in tqs]
            items = list(rec.items)
    else:
        outs = [wg.ops.attention(q, tk, tv, causal=True, variant=SPLITK) for q in tqs]
        items = list(dev.scheduler.pending)
    assert [d.kernel.name for d in items] == [SPLITK, "decode_splitk_combine_f32"] * 4   # split-K + combine per call
    inputs = {id(t.buffer) for t in [tk, tv, *tqs, *outs]}
    scratch = [frozenset(id(t.buffer) for t in d.tensors if id(t.buffer) not in inputs) - {id(dev.error_flag().buffer)}
               for d in items[::2]]
    assert scratch[0] and all(s == scratch[0] for s in scratch)  # one set of partial buffers for all four
    for q, o in zip(qs, outs):
        ok, err, base, bound = tolerance_check(o.numpy(), q, k, v, out_dtype=np.float32, causal=True)
        assert ok, (err, bound)
    assert dev.stats.since(before).submits >= 1


def test_repeated_recorded_calls_share_their_scratch(dev, rng):
    """Split-K decodes in one recording bind the same scratch (an op's scratch lives only between its own
    dispatches, which run in order) and each still gets its own answer."""
    skip_unless_runs(dev, SPLITK)   # split-K decode: 16.5 KB of workgroup memory
    k = rng.standard_normal((40, 2, 16)).astype(np.float32)
    v = rng.standard_normal((40, 2, 16)).astype(np.float32)
    qs = [rng.standard_normal((1, 4, 16)).astype(np.float32) for _ in range(6)]
    tk, tv = dev.tensor(k), dev.tensor(v)
    tqs = [dev.tensor(q) for q in qs]
    lengths = (40, 33) * 3  # two templates (kv_len is a param) with the same scratch
    with dev.record() as rec:
        outs = [wg.ops.attention(tq, tk, tv, causal=True, kv_len=n, variant=SPLITK) for tq, n in zip(tqs, lengths)]
        scratch = [{t.buffer for t in d.tensors if t.label.startswith("attention.part")}
                   for d in rec.items if isinstance(d, Dispatch)]  # (writes: the fallbacks' first uploads)
    for out, q, n in zip(outs, qs, lengths):
        ok, err, _, bound = tolerance_check(out.numpy(), q, k, v, out_dtype=np.float32, causal=True, kv_len=n)
        assert ok, (n, err, bound)
    assert len(scratch) == 12 and all(len(s) == 2 for s in scratch)  # chunks + combine, two partials each
    assert len(set().union(*scratch[4:])) == 2  # the calls after each template's first: one pair of partials


def test_every_call_and_every_program_node_is_an_instance_of_a_captured_template(dev, monkeypatch):
    """One capture form: immediate and recorded calls and a Program's nodes all reach their command list as
    dispatches made by OpTemplate.instantiate from a template made by ops/core.capture (the only caller of an
    op's encode); a repeated call captures nothing new."""
    from wgraph.ops import core
    from wgraph.scheduler.templates import OpTemplate

    captures, made = [], set()
    real_capture, real_instantiate = core.capture, OpTemplate.instantiate

    def counting_capture(device, op, params, inputs, outputs):
        captures.append(op.name)
        return real_capture(device, op, params, inputs, outputs)

    def counting_instantiate(self, inputs, outputs, scratch):
        out = real_instantiate(self, inputs, outputs, scratch)
        made.update(id(d) for d in out)
        return out

    monkeypatch.setattr(core, "capture", counting_capture)
    monkeypatch.setattr(OpTemplate, "instantiate", counting_instantiate)
    x = dev.tensor(np.arange(6, dtype=np.float32))
    dev.flush()
    dev.templates.clear()                               # other tests' templates: every first call captures
    y = wg.ops.scale(x, 1.375)
    wg.ops.scale(x, 1.375)                              # the same call again: the template, no capture
    assert captures == ["scale"]
    assert len(dev.scheduler.pending) == 2 and all(id(d) in made for d in dev.scheduler.pending)
    with dev.record() as rec:
        wg.ops.scale(y, 1.375)
        wg.ops.mul(x, y)
        wg.ops.mul(x, x)                                # one tensor in two slots: captured for this call only
        wg.ops.mul(x, x)
        items = list(rec.items)
    assert captures == ["scale", "mul", "mul", "mul"]   # mul(x, x) is not cached: its template fits it only
    assert [i for i in items if isinstance(i, Dispatch)] and all(id(d) in made for d in items if isinstance(d, Dispatch))
    np.testing.assert_array_equal(y.numpy(), np.arange(6) * 1.375)

    g = wg.Graph("captured")
    a = g.input("a", (6,), "f32")
    b = wg.ops.scale(a, 1.375)
    g.output("c", wg.ops.mul(b, wg.ops.scale(b, 2.0)))
    before = len(captures)
    prog = g.compile(dev)
    assert captures[before:] == ["scale", "scale", "mul"]   # every node captured, as a recording captures a call
    assert all(id(step.dispatch) in made for step in prog._commands.steps)
    np.testing.assert_allclose(prog.run(a=np.arange(6, dtype=np.float32))["c"].numpy(),
                               (np.arange(6) * 1.375) ** 2 * 2.0, rtol=1e-6)


def test_scratch_space_shares_buffers_across_calls(dev):
    """A call's scratch requests take distinct buffers, largest first; the calls of one list share them, and a
    buffer grows where a later call needs more. A Program's space is sized by reserve() and never grows."""
    from wgraph.scheduler.scratch import ScratchSpace
    from wgraph.tensor import TensorSpec

    space = ScratchSpace(dev.empty, "test")
    small, big, odd = (TensorSpec((10,), "f32"), "s"), (TensorSpec((100,), "f32"), "b"), (TensorSpec((3,), "f16"), "o")
    s1, b1 = space.place((small, big))
    assert (b1.buffer.size >= 400, s1.buffer is not b1.buffer) == (True, True)
    assert (s1.shape, b1.shape, s1.label, b1.label) == ((10,), (100,), "s", "b")
    (o2,) = space.place((odd,))                          # one request: the largest call's buffer 0
    assert o2.buffer is b1.buffer and o2.nbytes == 6
    assert space.place((small, big)) == (s1, b1)        # a repeated call: the same views
    huge = (TensorSpec((1000,), "f32"), "h")
    (h3,) = space.place((huge,))                        # more than buffer 0 holds: a larger buffer 0
    assert h3.buffer is not b1.buffer and space.sizes == [4000, 40]
    planned = ScratchSpace(dev.empty, "program")
    planned.reserve((small, big))
    planned.reserve((huge,))
    assert (planned.sizes, planned.requests, planned.naive_bytes) == ([4000, 40], 3, 4440)
    (p,) = planned.place((huge,), grow=False)
    assert p.buffer.size >= 4000
    with pytest.raises(wg.LimitError, match="scratch h2 needs 8000 bytes in shared buffer 0, which holds 4000"):
        planned.place(((TensorSpec((2000,), "f32"), "h2"),), grow=False)


def test_what_a_discarded_recording_made_is_unusable_or_written(rng):
    """Inside a recording that an exception discards: a tensor dev.tensor uploaded there is unusable (it read
    back a recycled buffer's bytes); the device's own buffers first made there (the error flag, fallbacks) are
    written at once (a flag holding garbage raised GpuValueError at every later readback)."""
    dev = wg.Device()
    table, ids = dev.tensor(np.ones((8, 4), np.float32)), dev.tensor(np.array([1, 2], np.uint32))
    junk = dev.tensor(np.array([3, 7, 9, 1], np.uint32))
    junk.numpy()
    del junk                                           # a 16-byte pool buffer holding non-zeros: the flag's size
    with pytest.raises(ZeroDivisionError):
        with dev.record():
            w = dev.tensor(np.ones(4, np.float32))
            wg.ops.embedding(ids, table)               # the first op that binds the error flag: made here
            1 / 0
    with pytest.raises(RecordingError, match=r"made inside recording .* \(by an op or dev.tensor\), which was "
                                             r"discarded"):
        w.numpy()
    x = dev.tensor(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(x.numpy(), np.arange(4))   # no error from the flag
    dev.check_errors()
    dev.destroy()


def test_an_out_of_an_older_epoch_is_refused_on_the_template_path():
    """A call whose template is cached checked out= only for shape and dtype: a tensor of the device before
    dev.recreate() was accepted, its flush then failed and dropped the other pending ops (a later read returned
    stale bytes). It is refused by name; a flush that raises leaves the tensors of its ops unusable."""
    d = wg.Device()
    old = d.empty((4,), "f32")
    d.recreate()
    x = d.tensor(np.arange(4, dtype=np.float32))
    wg.ops.scale(x, 2.0, out=d.empty((4,), "f32")).numpy()   # the out= template of this epoch
    y = wg.ops.scale(x, 10.0)
    with pytest.raises(wg.DeviceError, match="made before the device was re-created"):
        wg.ops.scale(x, 2.0, out=old)
    np.testing.assert_array_equal(y.numpy(), np.arange(4) * 10.0)
    d.destroy()


def test_a_failed_flush_leaves_its_outputs_unusable(dev, monkeypatch):
    from wgraph.scheduler.commands import CommandList

    x = dev.tensor(np.arange(4, dtype=np.float32))
    dev.flush()
    y = wg.ops.scale(x, 10.0)

    def fail(self, timestamps=None):
        raise RuntimeError("the driver said no")

    monkeypatch.setattr(CommandList, "submit", fail)
    with pytest.raises(RuntimeError, match="the driver said no"):
        dev.flush()
    monkeypatch.undo()
    with pytest.raises(RecordingError, match="the pending ops that write this tensor never ran: their submit raised "
                                             "RuntimeError: the driver said no"):
        y.numpy()
    np.testing.assert_array_equal(x.numpy(), np.arange(4))   # what the failed list only read is untouched


def test_check_errors_inside_a_recording_that_reports_says_when_to_check(dev):
    table, ids = dev.tensor(np.ones((8, 4), np.float32)), dev.tensor(np.array([1, 2], np.uint32))
    with dev.record():
        wg.ops.embedding(ids, table)
        with pytest.raises(RecordingError, match=r"dev.check_errors\(\) inside a recording whose ops report into "
                                                 r"the device error flag: .* check after the `with dev.record\(\)`"):
            dev.check_errors()
    dev.check_errors()


def test_a_profiled_recording_longer_than_one_query_set_is_timed_whole(dev):
    """record(profile=True) of 2049 dispatches needs 4098 timestamp queries, past a query set's 4096: its submit
    raised LimitError "... profile fewer at once" and discarded the recording. Now the stamps spread over two
    query sets: it runs, and rec.profile() counts all 2049 dispatches, each with time, within the span. The
    pending op before it runs first and is not in its rows."""
    if not dev.caps.has_timestamps:
        pytest.skip("the device has no timestamp queries")
    x = dev.tensor(np.ones(4, np.float32))
    before = wg.ops.scale(x, 5.0)                       # pending when the recording ends
    with dev.record(profile=True) as rec:
        y = wg.ops.scale(x, 2.0)
        for _ in range(2048):
            wg.ops.scale(x, 3.0, out=y)
    np.testing.assert_array_equal(y.numpy(), np.full(4, 3.0))
    np.testing.assert_array_equal(before.numpy(), np.full(4, 5.0))
    prof = rec.profile()
    assert sum(r.count for r in prof.rows) == 2049
    assert all(r.total_us > 0 for r in prof.rows)
    assert 0 < sum(r.total_us for r in prof.rows) <= prof.span_us * 1.0001


def test_a_profiled_recording_whose_pending_flush_fails_is_discarded(dev, monkeypatch):
    """record(profile=True) first submits the pending ops alone; when that submit raised, the recording stayed open
    (never submitted, never discarded) and its output read back a recycled buffer's bytes. Now it is discarded
    and its output unusable, naming the error."""
    from wgraph.scheduler.commands import CommandList

    x = dev.tensor(np.ones(4, np.float32))
    dev.flush()
    pending = wg.ops.scale(x, 5.0)

    def fail(self, timestamps=None):
        raise RuntimeError("the driver said no")

    with pytest.raises(RuntimeError, match="the driver said no"):
        with dev.record(profile=True) as rec:
            y = wg.ops.scale(x, 2.0)
            monkeypatch.setattr(CommandList, "submit", fail)
    monkeypatch.undo()
    assert "discarded" in repr(rec)
    with pytest.raises(RecordingError, match="recording #[0-9]+ never ran: its submit raised RuntimeError: the driver"):
        y.numpy()
    with pytest.raises(RecordingError, match="the pending ops that write this tensor never ran"):
        pending.numpy()
    np.testing.assert_array_equal(wg.ops.scale(x, 3.0).numpy(), np.full(4, 3.0))


def test_a_profiled_recording_that_dispatches_nothing_has_an_empty_profile(dev, monkeypatch):
    """record(profile=True) holding only a write (or nothing) dispatches nothing: rec.profile() raised
    RecordingError "device ... has no timestamp-query feature" on a device that has it. Now an empty table; a
    device without timestamps still says so. The pending op before it is not the recording's: not in its rows."""
    import attrs

    if not dev.caps.has_timestamps:
        pytest.skip("the device has no timestamp queries")
    x = dev.tensor(np.ones(4, np.float32))
    pending = wg.ops.scale(x, 5.0)
    with dev.record(profile=True) as rec:
        dev.write(x, np.full(4, 7.0, np.float32))
    prof = rec.profile()
    assert (prof.rows, prof.span_us) == ((), 0.0)
    np.testing.assert_array_equal(pending.numpy(), np.full(4, 5.0))   # read 1 before the write
    np.testing.assert_array_equal(x.numpy(), np.full(4, 7.0))
    with dev.record(profile=True) as empty:
        pass
    assert empty.profile().rows == ()
    monkeypatch.setattr(dev, "caps", attrs.evolve(dev.caps, has_timestamps=False))
    with dev.record(profile=True) as rec2:
        wg.ops.scale(x, 2.0)
    with pytest.raises(RecordingError, match="has no timestamp-query feature"):
        rec2.profile()


def test_items_are_a_copy_that_a_submit_does_not_change(dev):
    """rec.items was the recording's own list, which at the submit takes the immediate calls pending before the
    recording at its front: items taken as they were grew from 1 to 2, and dev.run(items) ran the earlier
    seqlens_advance again (lens 2 where the one call made it 1). Found by a probe of the graph layer."""
    lens = dev.tensor(np.zeros(1, np.uint32))
    x = dev.tensor(np.ones(4, np.float32))
    dev.sync()
    wg.ops.seqlens_advance(lens, 1)   # immediate: pending when the recording starts
    with dev.record() as rec:
        wg.ops.scale(x, 2.0)
        items = rec.items
    assert len(items) == 1 and lens.numpy().tolist() == [1]
    dev.run(items)
    assert lens.numpy().tolist() == [1]


def test_items_of_a_submitted_recording_are_refused_not_empty(dev):
    """`list(rec.items)` taken after the block used to be [] (the recording had moved to a fresh command list), so
    dev.run of it replayed nothing, silently; taken inside, the replay scales the new x."""
    x = dev.tensor(np.ones(4, np.float32))
    y = dev.tensor(np.zeros(4, np.float32))
    with dev.record() as rec:
        wg.ops.scale(x, 2.0, out=y)
        inside = list(rec.items)
    with pytest.raises(RecordingError, match="already submitted.*inside the with block"):
        rec.items
    dev.write(x, np.full(4, 5.0, np.float32))
    dev.run(inside)
    assert y.numpy().tolist() == [10.0] * 4
    with pytest.raises(ZeroDivisionError):
        with dev.record() as failed:
            wg.ops.scale(x, 3.0, out=y)
            1 / 0
    with pytest.raises(RecordingError, match="already discarded"):
        failed.items
    assert y.numpy().tolist() == [10.0] * 4
