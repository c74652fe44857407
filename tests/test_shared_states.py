"""Graph.compile(shared_states=...): states bound to buffers another owner holds (a Llama's weights in a
BatchedDecoder's program), checked, used as they are, never reset by the program."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.errors import RecordingError, ShapeError
from wgraph.graph import Graph, GraphError


def test_shared_states_are_checked(dev):
    g = Graph("shared")
    w = g.state("w", (4,), "f32")
    g.output("y", wg.ops.scale(w, 2.0))
    with pytest.raises(GraphError, match="shared state 'v' is not a state"):
        g.compile(dev, shared_states={"v": dev.tensor(np.ones(4, np.float32))})
    with pytest.raises(ShapeError, match=r"shared state 'w' is f32 \(4,\); the tensor given is f32 \(5,\)"):
        g.compile(dev, shared_states={"w": dev.tensor(np.ones(5, np.float32))})
    # a dtype is a DtypeError and a host array an ArgumentError, as everywhere else (ShapeError, DeviceError before)
    other = "f16" if dev.caps.has_f16 else "bf16"   # a dtype other than the state's that the device has
    with pytest.raises(wg.DtypeError, match=rf"shared state 'w' is f32 \(4,\); the tensor given is {other} \(4,\)"):
        g.compile(dev, shared_states={"w": dev.tensor(np.ones(4, np.float32), other)})
    with pytest.raises(wg.ArgumentError, match=r"Graph.compile: shared_states\['w'\]=array\(.*must be a Tensor"):
        g.compile(dev, shared_states={"w": np.ones(4, np.float32)})
    t = dev.tensor(np.arange(4, dtype=np.float32))
    prog = g.compile(dev, shared_states={"w": t})
    assert prog.run()["y"].numpy().tolist() == [0.0, 2.0, 4.0, 6.0]
    prog.reset_state()
    assert t.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]  # a shared state is not the program's to reset


def test_two_written_states_cannot_share_one_buffer(dev, rng):
    """The graph plans every state as a buffer of its own: kv_append writes k rows into 'kc' and v rows into 'vc'.
    One tensor shared as both had the v rows overwrite the k rows (the cache read back v's rows, silently). Refused
    at compile, naming both states; states only read may share a buffer (tied weights), and so may one written
    state and one read one."""
    g = Graph("kv")
    kc, vc = g.state("kc", (8, 2, 8)), g.state("vc", (8, 2, 8))
    wg.ops.kv_append((kc, vc), g.input("k", (3, 2, 8)), g.input("v", (3, 2, 8)), 0)
    t = dev.tensor(np.zeros((8, 2, 8), np.float32))
    for other in (t, t.reshape(16, 8).reshape(8, 2, 8)):
        with pytest.raises(wg.AliasingError, match=r"graph 'kv': shared states 'kc' and 'vc' are one buffer .*nodes "
                                                   r"write both"):
            g.compile(dev, shared_states={"kc": t, "vc": other})
    assert np.array_equal(t.numpy(), np.zeros((8, 2, 8)))

    tied = Graph("tied")
    emb, head = tied.state("emb", (4, 4)), tied.state("head", (4, 4))
    acc = tied.state("acc", (4, 4))
    wg.ops.add(emb, head, out=acc)
    w = rng.standard_normal((4, 4)).astype(np.float32)
    shared = dev.tensor(w)
    prog = tied.compile(dev, shared_states={"emb": shared, "head": shared})
    prog.run()
    np.testing.assert_array_equal(prog.state("acc").numpy(), 2 * w)
    one = Graph("one_written")
    a, b = one.state("a", (4, 4)), one.state("b", (4, 4))
    wg.ops.scale(one.input("x", (4, 4)), 3.0, out=a)
    one.output("y", wg.ops.scale(b, 1.0))
    s = dev.tensor(np.zeros((4, 4), np.float32))
    out = one.compile(dev, shared_states={"a": s, "b": s}).run(x=w)
    np.testing.assert_allclose(out["y"].numpy(), 3 * w.astype(np.float64), rtol=1e-6)


def test_explain_names_a_shared_state_as_the_graph_value_it_is(dev):
    """explain() named each binding by its tensor's label: a shared state's tensor is another owner's (label "" from
    dev.tensor, or that owner's name), so add(w, x) on a shared 'w' showed 'x -> add_1:0' (full=True: ', x'), as if
    the node read only x. It names the graph's value now."""
    g = Graph("sh")
    g.output("y", wg.ops.add(g.state("w", (4,)), g.input("x", (4,))))
    for label in ("", "other.weight"):
        prog = g.compile(dev, shared_states={"w": dev.tensor(np.arange(4, dtype=np.float32), label=label)})
        assert [(r.reads, r.writes) for r in prog.rows] == [(("w", "x"), ("add_1:0",))]
        assert "w, x -> add_1:0" in prog.explain()
        np.testing.assert_array_equal(prog.run(x=np.ones(4, np.float32))["y"].numpy(), [1, 2, 3, 4])
    ind = Graph("ind")   # indirect= a shared state: its workgroups read 'indirect(args+0)', no value's name
    ind.output("y", wg.ops.scale(ind.input("x", (4,)), 3.0, indirect=ind.state("n", (3,), "u32")))
    prog = ind.compile(dev, shared_states={"n": dev.tensor(np.array([1, 1, 1], np.uint32))})
    assert prog.rows[0].workgroups == "indirect(n+0)"
    np.testing.assert_array_equal(prog.run(x=np.ones(4, np.float32))["y"].numpy(), [3, 3, 3, 3])


def _failing_submit(monkeypatch):
    """CommandList.submit raises, as a driver's refusal would: what the failed list writes is poisoned."""
    from wgraph.scheduler.commands import CommandList

    def fail(self, timestamps=None):
        raise RuntimeError("the driver said no")

    monkeypatch.setattr(CommandList, "submit", fail)


def test_a_state_poisoned_after_compile_is_refused_at_the_next_replay(dev, monkeypatch):
    """A program checked the tensors it binds for poison at compile only: a shared state (or its own state) written
    by a recording whose submit then failed was poisoned, and run / run_many / profile replayed reading the bytes
    from before the write that never ran ([0, 2, 4, 6] for the 15s the recording meant). Each raises RecordingError
    naming the state and the recording now, and submits nothing; programs that bind nothing poisoned still run."""
    g = Graph("poisoned")
    g.output("y", wg.ops.scale(g.state("s", (4,)), 2.0))
    t = dev.tensor(np.arange(4, dtype=np.float32))
    prog = g.compile(dev, shared_states={"s": t})
    own = g.compile(dev)
    clean = g.compile(dev, shared_states={"s": dev.tensor(np.ones(4, np.float32))})
    np.testing.assert_array_equal(prog.run()["y"].numpy(), [0.0, 2.0, 4.0, 6.0])
    x = dev.tensor(np.full(4, 5.0, np.float32))
    dev.flush()
    _failing_submit(monkeypatch)
    with pytest.raises(RuntimeError, match="the driver said no"):
        with dev.record(label="fill"):
            wg.ops.scale(x, 3.0, out=t)
            wg.ops.scale(x, 3.0, out=own.state("s"))
    monkeypatch.undo()
    before = dev.stats.snapshot()
    for p, role in ((prog, "shared state"), (own, "state")):
        for call in (p.run, lambda: p.run_many(2)) + ((p.profile,) if dev.caps.has_timestamps else ()):
            with pytest.raises(RecordingError, match=rf"program 'poisoned': {role} 's' \(.*\) is unusable: fill never "
                                                     rf"ran: its submit raised RuntimeError: the driver said no"):
                call()
    assert dev.stats.since(before).submits == 0
    np.testing.assert_array_equal(clean.run()["y"].numpy(), [2.0] * 4)


def test_a_shared_state_made_in_a_recording_later_discarded_is_refused(dev):
    """Compiled inside a recording with a tensor that recording made: the tensor was fine at compile, and the
    recording's discard poisoned it after; the program then ran reading a buffer never written."""
    g = Graph("made_inside")
    g.output("y", wg.ops.scale(g.state("s", (4,)), 2.0))
    with pytest.raises(KeyError):
        with dev.record(label="inside"):
            t = wg.ops.scale(dev.tensor(np.ones(4, np.float32)), 4.0)
            prog = g.compile(dev, shared_states={"s": t})
            raise KeyError("discard")
    with pytest.raises(RecordingError, match=r"shared state 's' .* made inside inside .*which was discarded"):
        prog.run()


def test_a_fed_tensor_poisoned_by_a_failed_flush_is_refused(dev, monkeypatch):
    """The program's own input buffer written by pending ops whose flush failed: poisoned after compile, the run
    went on (it rewrites the input, but the buffer stays unreadable, prog.state('x') included): named now."""
    g = Graph("fed")
    g.output("y", wg.ops.scale(g.input("x", (4,)), 2.0))
    prog = g.compile(dev)
    a = dev.tensor(np.ones(4, np.float32))
    dev.flush()
    wg.ops.scale(a, 3.0, out=prog.state("x"))
    _failing_submit(monkeypatch)
    with pytest.raises(RuntimeError, match="the driver said no"):
        dev.flush()
    monkeypatch.undo()
    with pytest.raises(RecordingError, match=r"program 'fed': input buffer 'x' \(.*\) is unusable: the pending ops"):
        prog.run(x=np.ones(4, np.float32))
