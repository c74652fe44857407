"""Attention with wgraph: immediate, recorded (one submit), paged decode with kv_len on the GPU, and the
plan table (which kernel each call shape gets on this device, and why)."""

import numpy as np

import wgraph as wg

dev = wg.default_device()
rng = np.random.default_rng(0)
S, L, Hq, Hkv, D = 16, 64, 8, 2, 64
q = dev.tensor(rng.standard_normal((S, Hq, D)).astype(np.float32))
k = dev.tensor(rng.standard_normal((L, Hkv, D)).astype(np.float32))
v = dev.tensor(rng.standard_normal((L, Hkv, D)).astype(np.float32))

# Immediate: planned and encoded now, submitted when a result is read (or 32 ops wait). Causal is
# bottom-right aligned (the 16 queries are the last 16 positions of the 64 keys), as in FlashAttention.
out = wg.ops.attention(q, k, v, causal=True, sliding_window=32, softcap=30.0)
print("immediate:", out.shape, out.dtype, float(np.abs(out.numpy()).mean()))

# Recorded: both calls go into one command encoder and one queue.submit.
with dev.record():
    a = wg.ops.attention(q, k, v, causal=True)
    b = wg.ops.attention(q, k, v, causal=False)
same = a.numpy().tobytes() == wg.ops.attention(q, k, v, causal=True).numpy().tobytes()
print("recorded: identical to immediate:", same)

# Paged decode: rows of page p live at page_table[p] * page_size; kv_len is read by the kernel from a u32
# tensor, so the same call works as the cache grows (write the new length, run again).
page_size, pages = 16, [3, 1, 0, 2]
kv_len = dev.tensor(np.array([40], np.uint32))
q1 = dev.tensor(rng.standard_normal((1, Hq, D)).astype(np.float32))
table = dev.tensor(np.array(pages, np.uint32))
for n in (40, 41, 64):
    dev.write(kv_len, np.array([n], np.uint32))
    o = wg.ops.attention(q1, k, v, causal=True, kv_len=kv_len, kv_layout="paged", page_table=table,
                         page_size=page_size)
    print(f"paged decode, kv_len {n}:", o.numpy()[0, 0, :3])

# The plan table: which variant each call gets, from this device's capabilities.
print(f"\nplans on {dev.caps.adapter_name}:")
for s, d, length, dtype in [(1, 64, 100, "f32"), (1, 128, 4096, "f16"), (1, 256, 100, "f16kv"),
                            (128, 64, 128, "f32"), (128, 128, 128, "f16"), (128, 512, 128, "f32")]:
    qs = wg.TensorSpec((s, Hq, d), "f32" if dtype != "f16" else "f16")
    ks = wg.TensorSpec((length, Hkv, d), "f32" if dtype == "f32" else "f16")
    p = wg.ops.attention_plan(qs, ks, ks, causal=True, caps=dev.caps)
    print(f"  S={s:<4} D={d:<4} kv={length:<5} {dtype:<6} -> {p.variant:<28} {p.workgroups}  {p.reason}")
