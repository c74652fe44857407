"""Values users pass: numpy integers are integers wherever an int is accepted (bools are not)."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.ops.kv_cache import kv_append


def test_numpy_integers_are_accepted_where_ints_are(dev, rng):
    q = rng.standard_normal((2, 2, 8)).astype(np.float32)
    k, v = (rng.standard_normal((8, 1, 8)).astype(np.float32) for _ in range(2))
    Q, K, V = dev.tensor(q), dev.tensor(k), dev.tensor(v)
    plain = wg.ops.attention(Q, K, V, causal=True, kv_len=6, start_pos=3, kv_start=1, sliding_window=3).numpy()
    numpy_ints = wg.ops.attention(Q, K, V, causal=True, kv_len=np.int64(6), start_pos=np.uint32(3),
                                  kv_start=np.int32(1), sliding_window=np.int16(3)).numpy()
    assert numpy_ints.tobytes() == plain.tobytes()
    with pytest.raises(wg.ShapeError, match=r"kv_len=True must be an integer"):
        wg.ops.attention(Q, K, V, causal=True, kv_len=True)

    cache = dev.tensor(np.zeros((4, 1, 8), np.float32))
    rows = dev.tensor(k[:2])
    kv_append((cache, cache), rows, rows, np.int64(2))
    want = np.zeros((4, 1, 8), np.float32)
    want[2:] = k[:2]
    np.testing.assert_array_equal(cache.numpy(), want)
    assert Q.reshape(np.int64(4), -1).shape == (4, 8)

    g = wg.Graph("npint")
    gq = g.input("q", (2, 2, 8), "f32")
    gk = g.input("k", (8, 1, 8), "f32")
    g.output("y", wg.ops.attention(gq, gk, gk, causal=True, kv_len=np.int64(6)))
    assert wg.Graph.from_json(g.to_json()).to_json() == g.to_json()  # params hold plain ints
