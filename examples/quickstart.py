"""wgraph in one page: immediate ops, a recorded batch in one submit, and a compiled graph replayed with new
inputs (one submit per run), each checked against numpy."""

import numpy as np

import wgraph as wg

dev = wg.default_device()
print("device:", dev.caps.adapter_name)

rng = np.random.default_rng(0)
a = rng.standard_normal(4096).astype(np.float32)
b = rng.standard_normal(4096).astype(np.float32)
x, y = dev.tensor(a), dev.tensor(b)

# Immediate: each op plans and encodes now; the ops wait in the device's pending list, reading z submits them.
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

# A graph: build once, compile (plans, buffers, one uniform arena), replay with new inputs — one submit each.
g = wg.Graph("mlp_block")
gx = g.input("x", (16, 64), "f32")
w_up_host = rng.standard_normal((2 * 128, 64)).astype(np.float32) * 0.1    # [gate; up] stacked
w_down_host = rng.standard_normal((64, 128)).astype(np.float32) * 0.1
w_up, w_down = g.const("w_up", w_up_host), g.const("w_down", w_down_host)
norm = g.const("norm", np.ones(64, np.float32))
g.output("y", wg.ops.add(wg.ops.linear(wg.ops.swiglu(wg.ops.linear(wg.ops.rmsnorm(gx, norm), w_up)), w_down), gx))
prog = g.compile(dev)
print(prog.explain())
for step in range(3):
    xs = rng.standard_normal((16, 64)).astype(np.float32)
    before = dev.stats.snapshot()
    out = prog.run(x=xs)["y"]
    delta = dev.stats.since(before)
    h64 = xs.astype(np.float64)
    h64 = h64 / np.sqrt(np.mean(h64 ** 2, -1, keepdims=True) + 1e-6)
    wu, wd = w_up_host.astype(np.float64), w_down_host.astype(np.float64)
    gu = h64 @ wu.T
    act = gu[:, :128] / (1 + np.exp(-gu[:, :128])) * gu[:, 128:]
    ref = act @ wd.T + xs
    err = np.abs(out.numpy() - ref).max()
    assert err < 1e-4, err
    print(f"replay {step}: {delta.submits} submit, {delta.dispatches} dispatches, "
          f"{delta.buffers_created} buffers created; max error vs float64 numpy {err:.1e}")
