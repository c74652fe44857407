"""embedding: rows of a [V, H] table picked by u32 ids against numpy's table[ids] (f32, f16), host ids checked
before any GPU work, GPU ids out of range written as zeros and reported on the device error flag; recorded and
in a graph fed by argmax on the GPU."""

import numpy as np
import pytest

import wgraph as wg


def test_embedding_host_ids_f32_and_f16(dev, rng):
    table = rng.standard_normal((50, 24)).astype(np.float32)
    ids = np.array([3, 0, 49, 3, 17], np.int64)
    got = wg.ops.embedding(ids, dev.tensor(table)).numpy()
    assert got.shape == (5, 24) and got.tobytes() == table[ids].tobytes()
    assert wg.ops.embedding([7, 8], dev.tensor(table)).numpy().tobytes() == table[[7, 8]].tobytes()
    assert wg.ops.embedding(4, dev.tensor(table)).numpy().tobytes() == table[[4]].tobytes()
    if dev.caps.has_f16:
        t16 = table.astype(np.float16)
        ids2 = np.array([[1, 2], [48, 0]], np.uint32)  # any shape of ids: [..., H] out
        assert wg.ops.embedding(dev.tensor(ids2), dev.tensor(t16)).numpy().tobytes() == t16[ids2].tobytes()
        wide = wg.ops.embedding(ids, dev.tensor(t16), dtype="f32").numpy()  # f16 weights, f32 activations
        assert wide.dtype == np.float32 and wide.tobytes() == t16[ids].astype(np.float32).tobytes()


def test_embedding_host_ids_out_of_range_raise_before_gpu_work(dev):
    table = dev.tensor(np.zeros((10, 4), np.float32))
    before = dev.stats.snapshot()
    with pytest.raises(wg.LimitError, match=r"embedding: id 10 at index 2 is outside the table's 10 rows"):
        wg.ops.embedding([1, 2, 10, 11], table)
    with pytest.raises(wg.ArgumentError, match=r"embedding: ids=array\(\[-1\]\) must be a list .*of integers in "
                                               r"\[0, 4294967295\]"):
        wg.ops.embedding(np.array([-1]), table)
    with pytest.raises(wg.ArgumentError, match=r"ids=array\(\[1.5\]\) must be a list"):
        wg.ops.embedding(np.array([1.5]), table)
    with pytest.raises(wg.ArgumentError, match=r"ids=\[1, True\] must be a list"):   # not id 1, silently
        wg.ops.embedding([1, True], table)
    with pytest.raises(wg.DtypeError, match="ids must be u32, got f32"):
        wg.ops.embedding(dev.tensor(np.ones(2, np.float32)), table)
    with pytest.raises(wg.DtypeError, match=r"embedding: dtype='f16' from a f32 table: the rows are the table's "
                                            r"dtype \(dtype=None\) or f32 from an f16 or bf16 table"):
        wg.ops.embedding([1], table, dtype="f16")  # no narrowing
    with pytest.raises(wg.ArgumentError, match=r"embedding: ids=-1 must be an integer in \[0, 4294967295\]"):
        wg.ops.embedding(-1, table)   # named as given, not as the list [-1]
    with pytest.raises(wg.ShapeError, match=r"the table must be \[vocab, hidden\], got \(40,\)"):
        wg.ops.embedding([1], dev.tensor(np.zeros(40, np.float32)))
    delta = dev.stats.since(before)
    assert delta.submits == 0 and delta.dispatches == 0


def test_embedding_gpu_id_out_of_range_writes_zeros_and_sets_the_flag(dev, rng):
    table = rng.standard_normal((10, 8)).astype(np.float32)
    ids = dev.tensor(np.array([2, 10, 5, 4000000000], np.uint32))
    out = wg.ops.embedding(ids, dev.tensor(table))
    with pytest.raises(wg.GpuValueError, match=r"embedding: a token id read from the GPU was (10|4000000000); "
                                                r"it must be < 10"):
        dev.check_errors()
    got = out.numpy()  # the flag was cleared by the check
    assert got[[0, 2]].tobytes() == table[[2, 5]].tobytes()
    assert np.all(got[[1, 3]] == 0)


def test_embedding_fed_by_argmax_on_the_gpu(dev, rng):
    """A decode-style chain with no host round trip: argmax writes the id (out=) the embedding then reads,
    recorded into one submit and as a graph."""
    table = rng.standard_normal((16, 6)).astype(np.float32)
    logits = rng.standard_normal((1, 16)).astype(np.float32)
    tok = dev.empty((1,), "u32")
    t = dev.tensor(table)
    before = dev.stats.snapshot()
    with dev.record():
        wg.ops.argmax(dev.tensor(logits), out=tok)
        row = wg.ops.embedding(tok, t)
    assert dev.stats.since(before).submits == 1
    assert row.numpy().tobytes() == table[[np.argmax(logits)]].tobytes()
    g = wg.Graph("next_row")
    g.output("row", wg.ops.embedding(wg.ops.argmax(g.input("logits", (1, 16), "f32")), g.const("table", table)))
    prog = g.compile(dev)
    for _ in range(2):
        logits = rng.standard_normal((1, 16)).astype(np.float32)
        assert prog.run(logits=logits)["row"].numpy().tobytes() == table[[np.argmax(logits)]].tobytes()


@pytest.mark.parametrize("greedy", [True, False])
def test_replayed_graph_feeds_its_token_back(dev, rng, greedy):
    """The decode pattern: a state holds the token; each replay embeds it, scores the vocab and writes the
    next token into the same state (argmax, or sample with the step as an input), one submit per token."""
    table = rng.standard_normal((12, 8)).astype(np.float32)
    w = rng.standard_normal((12, 8)).astype(np.float32)
    g = wg.Graph("loop")
    token = g.state("token", (1,), "u32", init=np.array([3], np.uint32))
    logits = wg.ops.linear(wg.ops.embedding(token, g.const("table", table)), g.const("w", w))
    step = g.input("step", (1,), "u32")
    if greedy:
        wg.ops.argmax(logits, out=token)
    else:
        wg.ops.sample(logits, temperature=1.0, top_k=4, seed=9, step=step, out=token)
    g.output("logits", logits)
    prog = g.compile(dev)
    tok, t_table, t_w = 3, dev.tensor(table), dev.tensor(w)
    for s in range(4):
        before = dev.stats.snapshot()
        prog.run(step=s)
        assert dev.stats.since(before).submits == 1
        if greedy:
            tok = int(np.argmax(table[tok].astype(np.float64) @ w.T.astype(np.float64)))
        else:  # the same draw made by immediate calls from the same token
            ref_logits = wg.ops.linear(wg.ops.embedding([tok], t_table), t_w)
            tok = int(wg.ops.sample(ref_logits, temperature=1.0, top_k=4, seed=9, step=s).numpy()[0])
        assert prog.state("token").numpy().tolist() == [tok]
