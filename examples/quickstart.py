"""wgraph in one page: immediate ops, a recorded batch in one submit, checked against numpy."""

import numpy as np

import wgraph as wg

dev = wg.default_device()
print("device:", dev.caps.adapter_name)

rng = np.random.default_rng(0)
a = rng.standard_normal(4096).astype(np.float32)
b = rng.standard_normal(4096).astype(np.float32)
x, y = dev.tensor(a), dev.tensor(b)

# Immediate: each op plans, encodes and submits now.
z = wg.ops.add(wg.ops.scale(x, 2.0), y)
expected = a * np.float32(2.0) + b
assert np.array_equal(z.numpy(), expected)
print("immediate add(scale(x, 2), y) matches numpy:", np.abs(z.numpy() - expected).max())

# Recorded: 64 ops, one command encoder, one compute pass, one queue.submit.
before = dev.stats.snapshot()
with dev.record():
    h = x
    for _ in range(64):
        h = wg.ops.add(wg.ops.scale(h, 0.5), y)
delta = dev.stats.since(before)
ref = a.copy()
for _ in range(64):
    ref = ref * np.float32(0.5) + b
assert np.array_equal(h.numpy(), ref)
print(f"recorded 128 ops: {delta.submits} submit, {delta.compute_passes} compute pass, "
      f"{delta.dispatches} dispatches; result matches numpy")
