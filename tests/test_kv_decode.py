"""A decode step (append + attention) recorded once with the position in a u32 GPU tensor, replayed for 64 growing
positions, equals 64 immediate steps with int positions; also TieredKVCache growth (ring wrap, hot -> cold)."""

import numpy as np
import pytest

from wgraph.ops.attention import attention
from wgraph.ops.kv_cache import kv_append
from wgraph.ops.tiered_cache import TieredKVCache

import kv_reference as R
from kernel_support import TIERED_HOT, f16_or_f32, skip_unless_f16

STEPS, HQ, HKV, D = 64, 4, 2, 16


def _capture(dev, step):
    """Record `step()` (submitted once now) and keep its dispatches: pure data, replayed with dev.run."""
    with dev.record() as rec:
        result = step()
        items = list(rec.items)
    return items, result


def _inputs(rng, kv_dtype=np.float16):
    k = rng.standard_normal((STEPS, HKV, D)).astype(kv_dtype)
    v = rng.standard_normal((STEPS, HKV, D)).astype(kv_dtype)
    q = rng.standard_normal((STEPS, 1, HQ, D)).astype(np.float32)
    return k, v, q


def test_recorded_decode_step_replays_with_attention_op(dev, rng):
    dt = f16_or_f32(dev)   # the replay is the point, not the caches' dtype
    k, v, q = _inputs(rng, dt)
    caches = [tuple(dev.tensor(np.zeros((STEPS, HKV, D), dt)) for _ in range(2)) for _ in range(2)]
    immediate = []
    for p in range(STEPS):
        kv_append(caches[0], dev.tensor(k[p:p + 1]), dev.tensor(v[p:p + 1]), p)
        immediate.append(attention(dev.tensor(q[p]), *caches[0], causal=True, kv_len=p + 1).numpy())
    length = dev.tensor(np.array([1], np.uint32))
    k_in, v_in, q_in = dev.tensor(k[:1]), dev.tensor(v[:1]), dev.tensor(q[0])

    def step():
        kv_append(caches[1], k_in, v_in, length, pos_offset=-1)  # the row goes to position kv_len - 1
        return attention(q_in, *caches[1], causal=True, kv_len=length)

    items, out = _capture(dev, step)
    replayed = [out.numpy()]
    submits = dev.stats.submits
    for p in range(1, STEPS):
        dev.write(length, np.array([p + 1], np.uint32))
        dev.write(k_in, k[p:p + 1]), dev.write(v_in, v[p:p + 1]), dev.write(q_in, q[p])
        dev.run(items)
        replayed.append(out.numpy())
    assert dev.stats.submits - submits == 2 * (STEPS - 1)  # one submit per replayed step, one per readback
    for p in (0, 1, 17, STEPS - 1):
        np.testing.assert_allclose(replayed[p], immediate[p], atol=1e-6, rtol=0)
        want = R.attention(q[p], k[:p + 1], v[:p + 1], [p], np.arange(p + 1))
        np.testing.assert_allclose(replayed[p], want, atol=2e-5, rtol=0)
    np.testing.assert_array_equal(caches[1][0].numpy(), k)


@pytest.mark.parametrize("quant", [None, "int8"])
def test_recorded_tiered_decode_step_replays(dev, rng, quant):
    skip_unless_f16(dev, why=TIERED_HOT)
    k, v, q = _inputs(rng)
    opts = dict(kv_heads=HKV, head_dim=D, hot_window=8, cold_capacity=STEPS, quant=quant, page_size=8,
                page_table=rng.permutation(STEPS // 8))
    a, b = TieredKVCache(dev, **opts), TieredKVCache(dev, **opts)
    immediate = []
    for p in range(STEPS):
        a.append(dev.tensor(k[p:p + 1]), dev.tensor(v[p:p + 1]))
        immediate.append(a.attention(dev.tensor(q[p]), causal=True).numpy())
    length = dev.tensor(np.array([1], np.uint32))
    k_in, v_in, q_in = dev.tensor(k[:1]), dev.tensor(v[:1]), dev.tensor(q[0])

    def step():
        b.append(k_in, v_in, kv_len=length)
        return b.attention(q_in, causal=True, kv_len=length)

    items, out = _capture(dev, step)
    replayed = [out.numpy()]
    for p in range(1, STEPS):
        dev.write(length, np.array([p + 1], np.uint32))
        dev.write(k_in, k[p:p + 1]), dev.write(v_in, v[p:p + 1]), dev.write(q_in, q[p])
        dev.run(items)
        replayed.append(out.numpy())
    # Same kernels on the same data in the same order: bit-identical.
    np.testing.assert_array_equal(np.stack(replayed), np.stack(immediate))
    np.testing.assert_array_equal(b.cold_k.numpy(), a.cold_k.numpy())
    np.testing.assert_array_equal(b.hot_k.numpy(), a.hot_k.numpy())
    if quant is None:  # independent check of the last step (the quantized one is covered in test_tiered_cache)
        want = R.attention(q[-1], k, v, [STEPS - 1], np.arange(STEPS))
        np.testing.assert_allclose(replayed[-1], want, atol=2e-5, rtol=0)
