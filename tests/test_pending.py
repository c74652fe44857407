"""Immediate ops share submits: they wait in the device's pending command list and go to the GPU when
PENDING_ITEMS wait, or before the next read, fence, recording, program run or queue write, so every result
keeps the order of the calls. Counts come from dev.stats; values from exact powers of two."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.scheduler.queue import PENDING_ITEMS
from wgraph.errors import DeviceError


def test_immediate_ops_share_a_submit_per_pending_items(dev):
    x = dev.tensor(np.ones(64, np.float32))
    dev.flush()
    before = dev.stats.snapshot()
    n = 2 * PENDING_ITEMS + 5
    y = x
    for _ in range(n):
        y = wg.ops.scale(y, 2.0)
    d = dev.stats.since(before)
    assert (d.submits, d.dispatches) == (2, 2 * PENDING_ITEMS)  # two full lists went; five ops wait
    assert len(dev.scheduler.pending) == 5
    got = y.numpy()
    d = dev.stats.since(before)
    assert (d.submits, d.dispatches, d.readbacks) == (4, n, 1)  # the read submitted the five, then read
    assert len(dev.scheduler.pending) == 0
    np.testing.assert_array_equal(got, np.full(64, 2.0 ** n, np.float32))


def test_flush_with_nothing_pending_submits_nothing(dev):
    dev.flush()
    before = dev.stats.snapshot()
    dev.flush()
    assert dev.stats.since(before).submits == 0


def test_write_after_pending_ops_keeps_its_order(dev):
    x = dev.tensor(np.ones(4, np.float32))
    dev.flush()
    y = wg.ops.scale(x, 2.0)                       # pending: reads x = 1
    dev.write(x, np.full(4, 100.0, np.float32))    # joins the pending list after it
    z = wg.ops.scale(x, 3.0)                       # reads x = 100
    assert len(dev.scheduler.pending) == 3
    assert y.numpy().tolist() == [2.0] * 4
    assert z.numpy().tolist() == [300.0] * 4
    assert x.numpy().tolist() == [100.0] * 4


def test_program_run_comes_after_pending_ops(dev):
    g = wg.Graph("double_into_state")
    x = g.input("x", (4,), "f32")
    last = g.state("last", (4,), "f32")
    wg.ops.scale(x, 2.0, out=last)
    prog = g.compile(dev)
    prog.run(x=np.full(4, 1.0, np.float32))
    seen_last = wg.ops.scale(prog.state("last"), 1.0)   # pending: reads last = 2
    seen_x = wg.ops.scale(prog.state("x"), 1.0)         # pending: reads the input x = 1
    prog.run(x=np.full(4, 5.0, np.float32))             # writes x = 5 and last = 10: after the pending ops
    assert seen_last.numpy().tolist() == [2.0] * 4
    assert seen_x.numpy().tolist() == [1.0] * 4
    assert prog.state("last").numpy().tolist() == [10.0] * 4


def test_a_recording_carries_pending_ops_in_front_of_its_submit(dev):
    x = dev.tensor(np.full(4, 1.0, np.float32))
    dev.flush()
    before = dev.stats.snapshot()
    y = wg.ops.scale(x, 2.0)          # pending
    with dev.record():
        z = wg.ops.scale(y, 4.0)      # reads y: the pending op goes first, in the same submit
    d = dev.stats.since(before)
    assert (d.submits, d.dispatches) == (1, 2)
    assert z.numpy().tolist() == [8.0] * 4


def test_fence_covers_pending_ops(dev):
    x = dev.tensor(np.ones(4, np.float32))
    y = wg.ops.scale(x, 2.0)
    assert dev.scheduler.pending
    before = dev.stats.snapshot()
    fence = dev.fence()
    assert len(dev.scheduler.pending) == 0 and dev.stats.since(before).submits == 1
    dev.wait(fence)
    assert y.numpy().tolist() == [2.0] * 4


def test_destroy_drops_pending_ops():
    dev = wg.Device()
    x = dev.tensor(np.ones(4, np.float32))
    y = wg.ops.scale(x, 2.0)
    assert len(dev.scheduler.pending) == 1
    dev.destroy()
    assert len(dev.scheduler.pending) == 0
    with pytest.raises(DeviceError, match="lost or destroyed"):
        y.numpy()


def test_writes_behind_a_pending_op_count_toward_pending_items(dev):
    """One pending op, then 2 * PENDING_ITEMS + 3 dev.writes: every write joined the pending list and none was
    submitted (71 items held, each write's bytes staged in upload buffers at the next read). Now a write is an item
    like an op: the list goes at PENDING_ITEMS (the writes after it, nothing pending, are queue writes), and the
    results keep the order of the calls."""
    x = dev.tensor(np.ones(64, np.float32))
    dev.flush()
    before = dev.stats.snapshot()
    y = wg.ops.scale(x, 2.0)                               # reads x = 1
    n = 2 * PENDING_ITEMS + 3
    for i in range(n):
        dev.write(x, np.full(64, float(i), np.float32))
    # the op and the first PENDING_ITEMS - 1 writes went in one submit; the writes after it are queue writes
    assert dev.stats.since(before).submits == 1
    assert dev.scheduler.pending == ()
    z = wg.ops.scale(x, 4.0)                               # reads the last write
    np.testing.assert_array_equal(y.numpy(), np.full(64, 2.0))
    np.testing.assert_array_equal(z.numpy(), np.full(64, 4.0 * (n - 1)))


def test_wait_idle_counts_a_gpu_wait_only_when_something_was_submitted():
    """dev.stats.gpu_waits counts waits for the GPU (device.py); Scheduler.wait_idle (what an allocation past the
    deferred-destruction budget calls) added one on a device that had submitted nothing, where it waited for
    nothing (dev.wait(fence 0) adds none). Now 0 there; 1, after the pending op's submit, once there is work."""
    dev = wg.Device()
    try:
        x = dev.tensor(np.ones(4, np.float32))   # a queue write: no submit
        before = dev.stats.snapshot()
        dev.scheduler.wait_idle()
        d = dev.stats.since(before)
        assert (d.submits, d.gpu_waits) == (0, 0)
        dev.wait(dev.fence())                    # nothing submitted yet either: fence 0, no wait
        assert dev.stats.since(before).gpu_waits == 0
        y = wg.ops.scale(x, 2.0)
        dev.scheduler.wait_idle()
        d = dev.stats.since(before)
        assert (d.submits, d.gpu_waits, d.readbacks) == (1, 1, 0)
        assert y.numpy().tolist() == [2.0] * 4
    finally:
        dev.destroy()
