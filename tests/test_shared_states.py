"""Graph.compile(shared_states=...): states bound to buffers another owner holds (a Llama's weights in a
BatchedDecoder's program), checked, used as they are, never reset by the program."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.errors import ShapeError
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
