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
    t = dev.tensor(np.arange(4, dtype=np.float32))
    prog = g.compile(dev, shared_states={"w": t})
    assert prog.run()["y"].numpy().tolist() == [0.0, 2.0, 4.0, 6.0]
    prog.reset_state()
    assert t.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]  # a shared state is not the program's to reset
