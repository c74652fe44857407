"""Values users pass: numpy integers are integers wherever an int is accepted (bools are not)."""

import numpy as np
import pytest

import wgraph as wg
from attention_reference import tolerance_check
from wgraph.ops.kv_cache import kv_append


def test_numpy_integers_are_accepted_where_ints_are(dev, rng):
    q = rng.standard_normal((2, 2, 8)).astype(np.float32)
    k, v = (rng.standard_normal((8, 1, 8)).astype(np.float32) for _ in range(2))
    Q, K, V = dev.tensor(q), dev.tensor(k), dev.tensor(v)
    plain = wg.ops.attention(Q, K, V, causal=True, kv_len=6, start_pos=3, kv_start=1, sliding_window=3).numpy()
    numpy_ints = wg.ops.attention(Q, K, V, causal=True, kv_len=np.int64(6), start_pos=np.uint32(3),
                                  kv_start=np.int32(1), sliding_window=np.int16(3)).numpy()
    assert numpy_ints.tobytes() == plain.tobytes()
    with pytest.raises(wg.ArgumentError, match=r"kv_len=True must be an integer"):
        wg.ops.attention(Q, K, V, causal=True, kv_len=True)

    cache, vcache = (dev.tensor(np.zeros((4, 1, 8), np.float32)) for _ in range(2))
    rows = dev.tensor(k[:2])
    kv_append((cache, vcache), rows, rows, np.int64(2))
    want = np.zeros((4, 1, 8), np.float32)
    want[2:] = k[:2]
    np.testing.assert_array_equal(cache.numpy(), want)
    np.testing.assert_array_equal(vcache.numpy(), want)
    assert Q.reshape(np.int64(4), -1).shape == (4, 8)

    g = wg.Graph("npint")
    gq = g.input("q", (2, 2, 8), "f32")
    gk = g.input("k", (8, 1, 8), "f32")
    g.output("y", wg.ops.attention(gq, gk, gk, causal=True, kv_len=np.int64(6)))
    assert wg.Graph.from_json(g.to_json()).to_json() == g.to_json()  # params hold plain ints


@pytest.mark.parametrize("rows", [1, 4])  # a split-K decode (scratch in its template) and a one-pass prefill
def test_a_repeated_recorded_attention_call_checks_its_values_again(dev, rng, rows):
    """A repeated call skips planning (op template, params memo), never a check: a bad value on the same
    shapes still raises naming it, even where it equals a good one (6.0 == 6, True == 1, False == 0)."""
    q = rng.standard_normal((rows, 2, 8)).astype(np.float32)
    k, v = (rng.standard_normal((64, 1, 8)).astype(np.float32) for _ in range(2))
    Q, K, V = dev.tensor(q), dev.tensor(k), dev.tensor(v)
    outs = [dev.empty((rows, 2, 8), "f32") for _ in range(4)]
    with dev.record():
        for out, kv_len in zip(outs, (6, np.int64(6), 1, np.uint32(1))):  # each value twice: a template hit
            wg.ops.attention(Q, K, V, causal=True, kv_len=kv_len, out=out)
    for out, kv_len in zip(outs, (6, 6, 1, 1)):
        ok, err, _, bound = tolerance_check(out.numpy(), q, k, v, out_dtype=np.float32, causal=True, kv_len=kv_len)
        assert ok, (kv_len, err, bound)
    bad = [(dict(kv_len=6.0), "kv_len=6.0 must be an integer"),
           (dict(kv_len=np.float64(6)), r"kv_len=np.float64\(6.0\) must be an integer"),
           (dict(kv_len=True), "kv_len=True must be an integer"),
           (dict(kv_len=np.array([6], np.uint32)),  # host data: the rule says a GPU tensor is what else it takes
            r"kv_len=array\(\[6\], dtype=uint32\) must be an integer in \[0, 4294967295\], a u32 tensor of one "
            r"value \(on the GPU: dev.tensor\(np.array\(\[n\], np.uint32\)\)\) or None"),
           (dict(kv_len=6, kv_start=False), "kv_start=False must be an integer"),
           (dict(kv_len=6, window=[1.5, 0]), r"window=\[1.5, 0\] must be a pair"),
           (dict(kv_len=6, sliding_window=-1), "sliding_window=-1 must be an integer"),
           (dict(kv_len=6, causal=None), "pass causal=True or causal=False")]
    for kwargs, message in bad:
        with dev.record():
            wg.ops.attention(Q, K, V, causal=True, kv_len=6, out=outs[0])  # the good call, then the bad one
            with pytest.raises(wg.WgraphError, match=message):
                wg.ops.attention(Q, K, V, **{"causal": True, "out": outs[1], **kwargs})
