"""A decode loop over a tiered KV cache: an f16 hot ring of the newest rows, an int8 paged cold part, one step
recorded once (position in a u32 GPU tensor) and replayed for every new token."""

import numpy as np

import wgraph as wg
from wgraph.ops import TieredKVCache

dev = wg.default_device()
rng = np.random.default_rng(0)
heads, kv_heads, dim, steps = 8, 2, 64, 48

cache = TieredKVCache(dev, kv_heads=kv_heads, head_dim=dim, hot_window=16, cold_capacity=64, quant="int8",
                      page_size=16)
prompt = rng.standard_normal((20, kv_heads, dim)).astype(np.float16)
cache.append(dev.tensor(prompt), dev.tensor(prompt))  # prefill: 4 rows go straight to the cold part

length = dev.tensor(np.array([cache.length + 1], np.uint32))
k_in = dev.tensor(np.zeros((1, kv_heads, dim), np.float16))
v_in = dev.tensor(np.zeros((1, kv_heads, dim), np.float16))
q_in = dev.tensor(np.zeros((1, heads, dim), np.float32))
with dev.record() as rec:  # record one step: move the oldest hot row to cold, append, attend
    cache.append(k_in, v_in, kv_len=length)
    out = cache.attention(q_in, causal=True, kv_len=length)
    step = list(rec.items)

for p in range(21, 21 + steps):
    dev.write(length, np.array([p], np.uint32))
    dev.write(k_in, rng.standard_normal((1, kv_heads, dim)).astype(np.float16))
    dev.write(v_in, rng.standard_normal((1, kv_heads, dim)).astype(np.float16))
    dev.write(q_in, rng.standard_normal((1, heads, dim)).astype(np.float32))
    dev.run(step)  # replay: same dispatches, one submit
print("kv_len", p, "output", out.numpy().shape, "first values", np.round(out.numpy()[0, 0, :4], 4))
