"""`rope_kv_append` against float64 numpy: q and k rotated (rotate-half) at positions pos + r, k and v written
at those cache rows (f32 and f16 caches, odd head counts, 1-8 rows, int and GPU positions, ring and paged
layouts), nothing else written; one dispatch; GPU positions beyond the tables or the cache reported; in a
graph, readers of the cache before the op see the old rows and readers after it the new ones."""

import attrs
import numpy as np
import pytest

import wgraph as wg
from kernel_support import skip_unless_f16
from kv_reference import rope_rows

NP = {"f32": np.float32, "f16": np.float16}


@pytest.mark.parametrize("cache_dtype", ["f32", "f16"])
@pytest.mark.parametrize("rows,hq,hkv,d,pos,gpu_pos", [(1, 4, 2, 8, 5, False), (3, 3, 1, 6, 0, True),
                                                       (8, 6, 3, 16, 9, False), (2, 5, 5, 4, 30, True)])
def test_rope_kv_append(dev, rng, cache_dtype, rows, hq, hkv, d, pos, gpu_pos):
    skip_unless_f16(dev, cache_dtype)
    cap = 40
    cos, sin = wg.ops.rope_tables(48, d)
    qkv = rng.standard_normal((rows, (hq + 2 * hkv) * d)).astype(np.float32)
    old = rng.standard_normal((cap, hkv, d)).astype(NP[cache_dtype])
    kc, vc = dev.tensor(old), dev.tensor(old[::-1].copy())
    p = dev.tensor(np.array([pos], np.uint32)) if gpu_pos else pos
    before = dev.stats.snapshot()
    q = wg.ops.rope_kv_append(dev.tensor(qkv), dev.tensor(cos), dev.tensor(sin), (kc, vc), p, q_heads=hq)
    got_q, got_k, got_v = q.numpy(), kc.numpy(), vc.numpy()
    assert dev.stats.since(before).dispatches == 1
    x = qkv.astype(np.float64).reshape(rows, hq + 2 * hkv, d)
    where = np.arange(pos, pos + rows)
    assert got_q.shape == (rows, hq, d) and got_q.dtype == np.float32
    np.testing.assert_allclose(got_q, rope_rows(x[:, :hq], cos, sin, where), rtol=0, atol=1e-6)
    # the caches hold the rows rounded once to their dtype
    tol = 1e-6 if cache_dtype == "f32" else 2e-3
    np.testing.assert_allclose(got_k[where], rope_rows(x[:, hq:hq + hkv], cos, sin, where), rtol=tol, atol=tol)
    assert got_v[where].tobytes() == x[:, hq + hkv:].astype(NP[cache_dtype]).tobytes()
    keep = np.setdiff1d(np.arange(cap), where)
    assert got_k[keep].tobytes() == old[keep].tobytes() and got_v[keep].tobytes() == old[::-1][keep].tobytes()


def test_ring_and_paged_layouts(dev, rng):
    hq, hkv, d, rows = 2, 1, 4, 3
    cos, sin = wg.ops.rope_tables(64, d)
    qkv = rng.standard_normal((rows, (hq + 2 * hkv) * d)).astype(np.float32)
    x = qkv.astype(np.float64).reshape(rows, hq + 2 * hkv, d)
    k_want = rope_rows(x[:, hq:hq + hkv], cos, sin, np.arange(10, 13))
    # a ring of 8 rows: positions 10..12 land on rows 2..4
    kc, vc = dev.tensor(np.zeros((8, hkv, d), np.float32)), dev.tensor(np.zeros((8, hkv, d), np.float32))
    wg.ops.rope_kv_append(dev.tensor(qkv), dev.tensor(cos), dev.tensor(sin), (kc, vc), 10, q_heads=hq, layout="ring")
    np.testing.assert_allclose(kc.numpy()[2:5], k_want, atol=1e-6)
    # pages of 4 rows, page table [3, 0, 2, 1]: positions 10..12 are page 2 -> physical page 2, rows 10..11,
    # and page 2 again for 11; position 12 is page 3 -> physical page 1, row 4
    table = dev.tensor(np.array([3, 0, 2, 1], np.uint32))
    kc, vc = dev.tensor(np.zeros((16, hkv, d), np.float32)), dev.tensor(np.zeros((16, hkv, d), np.float32))
    wg.ops.rope_kv_append(dev.tensor(qkv), dev.tensor(cos), dev.tensor(sin), (kc, vc), 10, q_heads=hq,
                          layout="paged", page_table=table, page_size=4)
    got = kc.numpy()
    np.testing.assert_allclose(got[[10, 11, 4]], k_want, atol=1e-6)
    np.testing.assert_array_equal(vc.numpy()[[10, 11, 4]], x[:, hq + hkv:].astype(np.float32))


HQ = 2   # the position-report tests' q heads (one kv head, head_dim 4)


def _two_rows(dev, rng, cache_rows: int):
    """Two rows of qkv (2 q heads, 1 kv head, head_dim 4: HQ), the 8-row RoPE tables (numpy) and zeroed f32 k / v
    caches of `cache_rows` rows: the position-report tests' call."""
    cos, sin = wg.ops.rope_tables(8, 4)
    qkv = dev.tensor(rng.standard_normal((2, (HQ + 2) * 4)).astype(np.float32))
    kc, vc = (dev.tensor(np.zeros((cache_rows, 1, 4), np.float32)) for _ in range(2))
    return qkv, cos, sin, kc, vc


def test_gpu_positions_beyond_tables_or_cache_are_reported(dev, rng):
    qkv, cos, sin, kc, vc = _two_rows(dev, rng, cache_rows=20)
    q = wg.ops.rope_kv_append(qkv, dev.tensor(cos), dev.tensor(sin), (kc, vc), dev.tensor(np.array([7], np.uint32)),
                              q_heads=HQ)
    with pytest.raises(wg.GpuValueError, match="rope"):
        dev.check_errors()
    got = q.numpy()
    assert np.all(got[1] == 0) and np.any(got[0] != 0)  # position 8 is past the 8-row tables: zeros
    assert np.all(kc.numpy()[8] == 0) and np.any(kc.numpy()[7] != 0)
    cos64, sin64 = (dev.tensor(t) for t in wg.ops.rope_tables(64, 4))   # tables reaching past the 20-row cache
    q = wg.ops.rope_kv_append(qkv, cos64, sin64, (kc, vc), dev.tensor(np.array([19], np.uint32)), q_heads=HQ)
    with pytest.raises(wg.GpuValueError, match="kv_append"):
        dev.check_errors()
    assert np.any(q.numpy()[1] != 0)  # position 20 is in the tables, past the 20-row cache: q is still rotated


def test_gpu_position_beyond_tables_and_cache_is_reported_as_rope(dev, rng):
    """A row past both the 8-row tables and the 8-row cache is rope's error on every device: the v heads' threads
    checked the cache first and reported kv_append's, and the flag keeps whichever report lands first (a race
    between workgroups on a GPU)."""
    qkv, cos, sin, kc, vc = _two_rows(dev, rng, cache_rows=8)
    wg.ops.rope_kv_append(qkv, dev.tensor(cos), dev.tensor(sin), (kc, vc), dev.tensor(np.array([7], np.uint32)),
                          q_heads=HQ)
    with pytest.raises(wg.GpuValueError, match=r"rope: .* was 8; it must be < 8"):
        dev.check_errors()
    assert np.any(kc.numpy()[7] != 0) and np.any(vc.numpy()[7] != 0)  # row 7 fits both: written


def test_gpu_position_made_negative_by_pos_offset_is_reported_as_such(dev, rng):
    """GPU position 0 with pos_offset -1: row 0 sits at -1, before the tables and the cache. rope reported it as
    'was 0; it must be < 8' (0 < 8: no reason given); it is 4294967295 now, as kv_append says of a negative row."""
    qkv, cos, sin, kc, vc = _two_rows(dev, rng, cache_rows=8)
    q = wg.ops.rope_kv_append(qkv, dev.tensor(cos), dev.tensor(sin), (kc, vc), dev.tensor(np.array([0], np.uint32)),
                              q_heads=HQ, pos_offset=-1)
    with pytest.raises(wg.GpuValueError, match=r"rope: .*negative.* was 4294967295; it must be < 8"):
        dev.check_errors()
    assert np.all(q.numpy()[0] == 0) and np.any(q.numpy()[1] != 0)   # row 0 (at -1) zeros, row 1 (at 0) rotated
    assert np.any(kc.numpy()[0] != 0) and np.all(kc.numpy()[1:] == 0)


def test_errors(dev):
    cos, sin = (dev.tensor(t) for t in wg.ops.rope_tables(8, 4))
    kc, vc = dev.tensor(np.zeros((8, 1, 4), np.float32)), dev.tensor(np.zeros((8, 1, 4), np.float32))
    qkv = dev.tensor(np.zeros((2, 16), np.float32))
    with pytest.raises(wg.ShapeError, match=r"qkv must be \[rows, \(q_heads \+ 2 kv_heads\) \* head_dim\] = \[rows, 20\]"):
        wg.ops.rope_kv_append(qkv, cos, sin, (kc, vc), 0, q_heads=3)
    with pytest.raises(wg.LimitError, match="exceed the tables' 8 rows"):
        wg.ops.rope_kv_append(qkv, cos, sin, (kc, vc), 7, q_heads=2)
    with pytest.raises(wg.LimitError, match="cache full"):
        big = [dev.tensor(t) for t in wg.ops.rope_tables(32, 4)]
        wg.ops.rope_kv_append(qkv, *big, (kc, vc), 7, q_heads=2)
    other = "f16" if dev.caps.has_f16 else "bf16"   # a cache dtype other than the k cache's that the device has
    with pytest.raises(wg.DtypeError, match=f"k cache f32 and v cache {other} differ"):
        wg.ops.rope_kv_append(qkv, cos, sin, (kc, dev.tensor(np.zeros((8, 1, 4), np.float32), other)), 0, q_heads=2)
    with pytest.raises(wg.ArgumentError, match="rope_kv_append: pos=1.0 must be an integer in \\[0, 4294967295\\] or a u32 GPU tensor"):
        wg.ops.rope_kv_append(qkv, cos, sin, (kc, vc), 1.0, q_heads=2)
    # tables of the right shape and another dtype: a DtypeError, as rope's (was a ShapeError); a wrong shape: ShapeError
    half = dev.tensor(np.ones((8, 2), np.float32), other)
    with pytest.raises(wg.DtypeError, match=rf"rope_kv_append: cos table must be f32 \[max_pos, 2\] for head_dim 4, "
                                            rf"got {other} \(8, 2\)"):
        wg.ops.rope_kv_append(qkv, half, sin, (kc, vc), 0, q_heads=2)
    with pytest.raises(wg.DtypeError, match=rf"linear_rope_kv_append: sin table must be f32 .* got {other} \(8, 2\)"):
        wg.ops.linear_rope_kv_append(qkv, dev.tensor(np.zeros((16, 16), np.float32)), cos, half, (kc, vc), 0, q_heads=2)
    with pytest.raises(wg.ShapeError, match=r"rope_kv_append: cos table must be f32 \[max_pos, 2\] for head_dim 4, "
                                            r"got f32 \(8, 3\)"):
        wg.ops.rope_kv_append(qkv, dev.tensor(np.ones((8, 3), np.float32)), sin, (kc, vc), 0, q_heads=2)


def test_in_a_graph_orders_cache_readers(dev, rng):
    """The caches are written in place: a reader added before the op sees the old rows, one after the new."""
    hq, hkv, d = 2, 1, 4
    cos, sin = wg.ops.rope_tables(16, d)
    g = wg.Graph("rope_kv")
    qkv = g.input("qkv", (1, (hq + 2 * hkv) * d), "f32")
    pos = g.input("pos", (1,), "u32")
    kc, vc = g.state("k", (16, hkv, d), "f32"), g.state("v", (16, hkv, d), "f32")
    before = wg.ops.scale(kc, 1.0)
    q = wg.ops.rope_kv_append(qkv, g.const("cos", cos), g.const("sin", sin), (kc, vc), pos, q_heads=hq)
    after = wg.ops.scale(kc, 1.0)
    for name, v in (("before", before), ("q", q), ("after", after)):
        g.output(name, v)
    node = g.producer[q.name]  # ordering edges: the earlier reader before it, the later reader after it
    assert g.nx.has_edge(g.producer[before.name], node) and g.nx.has_edge(node, g.producer[after.name])
    prog = g.compile(dev)
    x = rng.standard_normal((1, (hq + 2 * hkv) * d)).astype(np.float32)
    out = prog.run(qkv=x, pos=3)
    want = rope_rows(x.astype(np.float64).reshape(1, hq + 2 * hkv, d)[:, hq:hq + hkv], cos, sin, np.array([3]))
    assert np.all(out["before"].numpy() == 0)
    np.testing.assert_allclose(out["after"].numpy()[3], want[0], atol=1e-6)
    np.testing.assert_allclose(prog.state("k").numpy()[3], want[0], atol=1e-6)


@pytest.mark.parametrize("batched", [False, True])
def test_gpu_position_beyond_tables_writes_neither_k_nor_v(dev, rng, batched):
    """A GPU position inside the cache but past the RoPE tables wrote the v row (k's stayed old): the cache held a
    half-written row. Now no cache row is written (as the docstrings say); the whole caches against numpy."""
    hq, hkv, d, cap = 2, 2, 4, 12
    cos, sin = wg.ops.rope_tables(8, d)
    old_k, old_v = (rng.standard_normal((2, cap, hkv, d)).astype(np.float32) for _ in "kv")
    x = rng.standard_normal((2, (hq + 2 * hkv) * d)).astype(np.float32)
    kc, vc = dev.tensor(old_k if batched else old_k[0]), dev.tensor(old_v if batched else old_v[0])
    want_k, want_v = old_k.astype(np.float64), old_v.astype(np.float64)
    xs = x.astype(np.float64).reshape(2, hq + 2 * hkv, d)
    if batched:   # sequence 0 at 3 (written), sequence 1 at 9 (in the cache, past the tables)
        wg.ops.rope_kv_append_batched(dev.tensor(x), dev.tensor(cos), dev.tensor(sin), (kc, vc),
                                      dev.tensor(np.array([3, 9], np.uint32)), q_heads=hq)
        want_k[0, 3], want_v[0, 3] = rope_rows(xs[:1, hq:hq + hkv], cos, sin, np.array([3]))[0], xs[0, hq + hkv:]
    else:   # rows at 7 (written) and 8 (in the cache, past the tables)
        wg.ops.rope_kv_append(dev.tensor(x), dev.tensor(cos), dev.tensor(sin), (kc, vc),
                              dev.tensor(np.array([7], np.uint32)), q_heads=hq)
        want_k, want_v = want_k[0], want_v[0]
        want_k[7], want_v[7] = rope_rows(xs[:1, hq:hq + hkv], cos, sin, np.array([7]))[0], xs[0, hq + hkv:]
    with pytest.raises(wg.GpuValueError, match="rope"):
        dev.check_errors()
    np.testing.assert_allclose(kc.numpy(), want_k, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(vc.numpy(), want_v)


def test_update_to_a_negative_ring_position_is_refused(dev, rng):
    """rope_kv_append into a ring checked an int position against the tables (pos + rows <= table rows) and the
    ring's size only: Program.update(pos=-1) passed, and each run wrote zeros for q with no cache row, reported on
    the GPU alone. A negative int position is a LimitError now; the program keeps its params (q at position 2)."""
    hq, hkv, d = 1, 1, 4
    cos, sin = wg.ops.rope_tables(8, d)
    g = wg.Graph("rope_ring")
    qkv = g.input("qkv", (1, (hq + 2 * hkv) * d), "f32")
    kc, vc = g.state("k", (3, hkv, d), "f32"), g.state("v", (3, hkv, d), "f32")
    g.output("q", wg.ops.rope_kv_append(qkv, g.const("cos", cos), g.const("sin", sin), (kc, vc), 2, q_heads=hq,
                                        layout="ring"))
    prog = g.compile(dev)
    (node,) = [n for n in prog.order if n.startswith("rope_kv_append")]
    with pytest.raises(wg.LimitError, match=r"rope_kv_append: position -1 \(pos \+ pos_offset\) is negative"):
        prog.update(node, attrs.evolve(prog.params[node], pos=-1))
    x = rng.standard_normal((1, (hq + 2 * hkv) * d)).astype(np.float32)
    q = prog.run(qkv=x)["q"].numpy()
    heads = x.astype(np.float64).reshape(1, hq + 2 * hkv, d)
    np.testing.assert_allclose(q[0, 0], rope_rows(heads[:, :hq], cos, sin, np.array([2]))[0, 0], atol=1e-6)
    np.testing.assert_array_equal(prog.state("v").numpy()[2, 0], x[0, 2 * d:])
