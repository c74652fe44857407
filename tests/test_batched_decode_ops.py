"""The batched decode step's own ops against numpy: rope_kv_append_batched (RoPE of q and k at one GPU position
per sequence, K/V rows into each sequence's cache, f32 and f16 caches; positions out of range reported on the
device error flag) and decode_advance_batched (each sequence's decode_advance)."""

import attrs
import numpy as np
import pytest

import wgraph as wg
from wgraph.errors import GpuValueError, ShapeError


def _rope(x, cos, sin):
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], -1)


@pytest.mark.parametrize("pair", [tuple, list])   # the cache as a list was refused (rope_kv_append takes either)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_rope_kv_append_batched_against_numpy(dtype, pair, dev):
    if dtype == "f16" and not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    rng = np.random.default_rng(5)
    B, cap, hq, hkv, d = 3, 8, 4, 2, 16
    np_dt = np.float32 if dtype == "f32" else np.float16
    qkv = rng.standard_normal((B, (hq + 2 * hkv) * d)).astype(np.float32)
    cos, sin = wg.ops.rope_tables(16, d)
    pos = np.array([0, 5, 7], np.uint32)
    kc0 = rng.standard_normal((B, cap, hkv, d)).astype(np_dt)
    vc0 = rng.standard_normal((B, cap, hkv, d)).astype(np_dt)
    kc, vc = dev.tensor(kc0), dev.tensor(vc0)
    q = wg.ops.rope_kv_append_batched(dev.tensor(qkv), dev.tensor(cos), dev.tensor(sin), pair((kc, vc)),
                                      dev.tensor(pos), q_heads=hq)
    x = qkv.reshape(B, hq + 2 * hkv, d).astype(np.float64)
    c64, s64 = cos.astype(np.float64)[pos][:, None, :], sin.astype(np.float64)[pos][:, None, :]
    assert np.max(np.abs(q.numpy() - _rope(x[:, :hq], c64, s64))) < 1e-5
    want_k, want_v = kc0.copy(), vc0.copy()
    want_k[np.arange(B), pos] = _rope(x[:, hq:hq + hkv], c64, s64).astype(np_dt)
    want_v[np.arange(B), pos] = x[:, hq + hkv:].astype(np_dt)
    tol = 1e-6 if dtype == "f32" else 1e-3  # one rounding of a value below 4 to f16: at most 2^-9
    assert np.max(np.abs(kc.numpy().astype(np.float64) - want_k)) < tol
    assert (vc.numpy() == want_v).all()  # v is copied: exactly the rounded value
    changed = (kc.numpy() != kc0).any(axis=(2, 3))
    assert changed.tolist() == [[p == pos[b] for p in range(cap)] for b in range(B)]


def test_rope_kv_append_batched_reports_positions_out_of_range(dev):
    B, cap, hq, hkv, d = 2, 4, 2, 1, 8
    cos, sin = wg.ops.rope_tables(6, d)
    kc = dev.tensor(np.zeros((B, cap, hkv, d), np.float32))
    vc = dev.tensor(np.zeros((B, cap, hkv, d), np.float32))
    qkv = dev.tensor(np.ones((B, (hq + 2 * hkv) * d), np.float32))
    wg.ops.rope_kv_append_batched(qkv, dev.tensor(cos), dev.tensor(sin), (kc, vc), dev.tensor(np.array([1, 4], np.uint32)),
                                  q_heads=hq)
    with pytest.raises(GpuValueError, match="kv_append: .* was 4; it must be < 4, the cache capacity"):
        dev.check_errors()
    assert kc.numpy()[1].sum() == 0 and vc.numpy()[1].sum() == 0 and kc.numpy()[0, 1].sum() != 0
    # past the tables only (a cache of 8 rows holds position 6): q's row zeros, no cache row written
    k8, v8 = (dev.tensor(np.zeros((B, 8, hkv, d), np.float32)) for _ in range(2))
    q = wg.ops.rope_kv_append_batched(qkv, dev.tensor(cos), dev.tensor(sin), (k8, v8),
                                      dev.tensor(np.array([6, 0], np.uint32)), q_heads=hq)
    with pytest.raises(GpuValueError, match="rope: .* was 6; it must be < 6, the table.s rows"):
        q.numpy()
    assert (q.numpy()[0] == 0).all() and (q.numpy()[1] != 0).any()
    assert k8.numpy()[0].sum() == 0 and v8.numpy()[0].sum() == 0 and v8.numpy()[1, 0].sum() != 0
    # past both (the cache of 4 rows): rope's report alone. The v heads' threads checked the capacity first and
    # reported kv_append, the q and k heads' rope, and the flag kept whichever landed first: on an H100 kv_append's
    q = wg.ops.rope_kv_append_batched(qkv, dev.tensor(cos), dev.tensor(sin), (kc, vc),
                                      dev.tensor(np.array([6, 0], np.uint32)), q_heads=hq)
    with pytest.raises(GpuValueError, match="rope: .* was 6; it must be < 6, the table.s rows"):
        q.numpy()
    assert (q.numpy()[0] == 0).all()
    with pytest.raises(ShapeError, match=r"pos must be u32 \[batch=2\]"):
        wg.ops.rope_kv_append_batched(qkv, dev.tensor(cos), dev.tensor(sin), (kc, vc),
                                      dev.tensor(np.array([1], np.uint32)), q_heads=hq)
    with pytest.raises(ShapeError, match=r"qkv must be \[batch, .*\] = \[2, 24\] for 1 q heads .* got \(2, 32\)"):
        wg.ops.rope_kv_append_batched(qkv, dev.tensor(cos), dev.tensor(sin), (kc, vc),
                                      dev.tensor(np.array([1, 1], np.uint32)), q_heads=1)



@pytest.mark.parametrize("bad", [True, 1.0, 0])
def test_rope_kv_append_batched_update_checks_q_heads_by_its_rule(dev, bad):
    """Program.update(q_heads=True) (or 1.0, from a graph file) reached q's TensorSpec and was refused as 'TensorSpec:
    shape=(2, True, 4) must be a shape', and q_heads=0 as a ShapeError: the call itself says 'q_heads=True must be
    an integer in [1, ...]' (ArgumentError). The node's params take the same rule as the call; 1 still runs."""
    cos, sin = wg.ops.rope_tables(8, 4)
    g = wg.Graph("batched_rope")
    kc, vc = g.state("kc", (2, 4, 1, 4)), g.state("vc", (2, 4, 1, 4))
    q = wg.ops.rope_kv_append_batched(g.input("qkv", (2, 12), "f32"), g.const("cos", cos), g.const("sin", sin),
                                      (kc, vc), g.input("pos", (2,), "u32"), q_heads=1)
    g.output("q", q)
    prog = g.compile(dev)
    node = g.producer[q.name]
    with pytest.raises(wg.ArgumentError, match=rf"rope_kv_append_batched: q_heads={bad!r} must be an integer in "
                                               rf"\[1, 4294967295\]"):
        prog.update(node, attrs.evolve(prog.params[node], q_heads=bad))
    qkv = np.arange(24, dtype=np.float32).reshape(2, 12)
    out = prog.run(qkv=qkv, pos=np.array([0, 0], np.uint32))["q"].numpy()
    np.testing.assert_array_equal(out, qkv[:, None, :4])   # position 0: cos 1, sin 0


def test_decode_advance_batched_against_numpy(dev):
    L = 5
    nxt = np.array([7, 8, 9], np.uint32)
    pos0, hist0 = np.array([0, 2, 4], np.uint32), np.arange(15, dtype=np.uint32).reshape(3, L)
    token, pos = dev.tensor(np.zeros(3, np.uint32)), dev.tensor(pos0)
    kv_len, history = dev.tensor(pos0 + 1), dev.tensor(hist0)
    wg.ops.decode_advance_batched(dev.tensor(nxt), token=token, history=history, pos=pos, kv_len=kv_len)
    want = hist0.copy()
    want[0, 1], want[1, 3] = 7, 8  # sequence 2's next position (5) is past the history: not written
    assert token.numpy().tolist() == [7, 8, 9]
    assert pos.numpy().tolist() == [1, 3, 5] and kv_len.numpy().tolist() == [2, 4, 6]
    assert (history.numpy() == want).all()
    with pytest.raises(ShapeError, match=r"history must be \[batch=3, positions >= 1\]"):
        wg.ops.decode_advance_batched(dev.tensor(nxt), token=token, history=dev.tensor(np.zeros(3, np.uint32)),
                                      pos=pos, kv_len=kv_len)


def test_empty_u32_inputs_of_the_advance_are_shape_errors(dev):
    """An empty u32 tensor (a batch of 0 sequences, a history of 0 positions) has the right dtype and the wrong
    shape: both advances raised DtypeError for it (the batched op's own 'batch >= 1' ShapeError never ran); a
    float tensor is still the DtypeError."""
    u32 = lambda *shape: dev.tensor(np.zeros(shape, np.uint32))   # noqa: E731
    with pytest.raises(ShapeError, match=r"decode_advance_batched: next_ids must be a u32 tensor of at least one "
                                         r"value, got u32 \(0,\)"):
        wg.ops.decode_advance_batched(u32(0), token=u32(0), history=u32(0, 4), pos=u32(0), kv_len=u32(0))
    with pytest.raises(ShapeError, match=r"decode_advance_batched: history .* got u32 \(2, 0\)"):
        wg.ops.decode_advance_batched(u32(2), token=u32(2), history=u32(2, 0), pos=u32(2), kv_len=u32(2))
    with pytest.raises(ShapeError, match=r"decode_advance: pos .* got u32 \(0,\)"):
        wg.ops.decode_advance(u32(1), token=u32(1), history=u32(4), pos=u32(0), kv_len=u32(1))
    with pytest.raises(wg.DtypeError, match=r"decode_advance_batched: token .* got f32 \(2,\)"):
        wg.ops.decode_advance_batched(u32(2), token=dev.tensor(np.zeros(2, np.float32)), history=u32(2, 4),
                                      pos=u32(2), kv_len=u32(2))
