"""Device loss, simulated with dev.destroy(): the next call raises a clear DeviceError before GPU work;
dev.recreate() (the explicit re-plan) bumps the epoch and invalidates every cache (pipelines, bind groups,
uniform cache, fallbacks, pool), old tensors, captured dispatches and compiled programs raise, and the same
calls on new tensors re-plan and give the same answer. Each test uses its own device."""

import gc
import re
import threading

import numpy as np
import pytest

import wgraph as wg
from wgraph.errors import DeviceError


@pytest.fixture
def fresh():
    d = wg.Device()
    yield d
    if not d.lost:
        d.destroy()


def _qkv(rng):
    return (rng.standard_normal((5, 4, 16)).astype(np.float32), rng.standard_normal((20, 2, 16)).astype(np.float16),
            rng.standard_normal((20, 2, 16)).astype(np.float16))


def _attn(d, q, k, v, **kw):
    return wg.ops.attention(d.tensor(q), d.tensor(k), d.tensor(v), **kw).numpy()


def test_every_call_after_destroy_raises_before_gpu_work(fresh, rng):
    q, k, v = _qkv(rng)
    Q = fresh.tensor(q)
    fresh.destroy()
    before = fresh.stats.snapshot()
    calls = [lambda: fresh.tensor(q), lambda: fresh.empty((4,)), lambda: Q.numpy(), lambda: fresh.write(Q, q),
             lambda: wg.ops.attention(Q, Q, Q, causal=True), lambda: fresh.record(), lambda: fresh.run([]),
             lambda: fresh.sync()]
    for call in calls:
        with pytest.raises(DeviceError, match=r"is lost or destroyed; call dev.recreate\(\)"):
            call()
    d = fresh.stats.since(before)
    assert (d.submits, d.dispatches, d.buffers_created) == (0, 0, 0)
    fresh.destroy()  # idempotent


def test_recreate_replans_with_every_cache_invalidated(fresh, rng):
    q, k, v = _qkv(rng)
    want = _attn(fresh, q, k, v, causal=True)
    with fresh.record():
        wg.ops.scale(fresh.tensor(np.ones(4, np.float32)), 2.0)
    old = dict(epoch=fresh.epoch, pipelines=fresh.pipelines, bind_groups=fresh.bind_groups, pool=fresh.pool,
               scheduler=fresh.scheduler, wgpu=fresh.wgpu)
    assert len(fresh.scheduler.uniforms) > 0 and fresh._fallbacks and fresh.pipelines._pipelines
    fresh.recreate()
    assert fresh.epoch != old["epoch"] and not fresh.lost and fresh.wgpu is not old["wgpu"]
    for name in ("pipelines", "bind_groups", "pool", "scheduler"):
        assert getattr(fresh, name) is not old[name], name
    assert not fresh.pipelines._pipelines and len(fresh.scheduler.uniforms) == 0 and fresh.pool.free_count == 0
    assert len(old["scheduler"].uniforms) == 0 and old["scheduler"].closed
    assert not fresh._fallbacks and fresh._staging is None
    assert not old["pipelines"]._pipelines and not old["bind_groups"]._groups and old["pool"].free_count == 0
    before = fresh.stats.snapshot()
    got = _attn(fresh, q, k, v, causal=True)
    d = fresh.stats.since(before)
    assert d.pipelines_created >= 1 and d.bind_groups_created >= 1   # re-planned and re-built, nothing reused
    assert got.tobytes() == want.tobytes()
    assert all(key[2] == fresh.epoch for key in fresh._fallbacks)


def test_old_tensors_dispatches_and_programs_raise_after_recreate(fresh, rng):
    x = fresh.tensor(np.arange(4, dtype=np.float32))
    with fresh.record() as rec:
        wg.ops.scale(x, 2.0)
        items = list(rec.items)
    g = wg.Graph("step")
    xin = g.input("x", (4,), "f32")
    g.output("y", wg.ops.scale(xin, 3.0))
    prog = g.compile(fresh)
    assert prog.run(x=np.ones(4, np.float32))["y"].numpy().tolist() == [3.0] * 4
    fresh.destroy()
    with pytest.raises(DeviceError, match="the device is now lost: compile the graph again"):
        prog.run(x=np.ones(4, np.float32))
    fresh.recreate()
    before = fresh.stats.snapshot()
    with pytest.raises(DeviceError, match="was made before the device was re-created"):
        wg.ops.scale(x, 2.0)
    with pytest.raises(DeviceError, match="a captured item of another device or of epoch"):
        fresh.run(items)
    with pytest.raises(DeviceError, match=r"epoch \d+; the device is now epoch \d+: compile the graph again"):
        prog.run(x=np.ones(4, np.float32))
    d = fresh.stats.since(before)
    assert (d.submits, d.dispatches) == (0, 0)
    # the explicit way back: compile again on the re-created device
    again = g.compile(fresh)
    assert again.epoch == fresh.epoch
    assert again.run(x=np.ones(4, np.float32))["y"].numpy().tolist() == [3.0] * 4


def test_live_buffer_count_returns_after_loss(fresh):
    """Pooled and live buffers of the lost device are accounted destroyed (pool cleared at destroy, tensors
    of an old epoch when they die), so dev.stats.live_buffers does not leak across a re-creation."""
    base = fresh.stats.live_buffers
    xs = [fresh.tensor(np.ones(n, np.float32)) for n in (4, 100, 1000)]
    wg.ops.scale(xs[0], 2.0).numpy()
    del xs
    fresh.recreate()
    assert fresh.stats.live_buffers == base


def test_recreate_inside_a_recording_is_refused_naming_it(fresh):
    """dev.recreate() inside `with dev.record(label="step"):` replaced the device under the open recording: the
    recording stayed bound to the old scheduler, the block's later op calls ran at once on the new device, and
    leaving the block raised DeviceError. Now the recreate is refused at the call, naming the recording, and
    changes nothing: the block goes on recording and submits once, with every op's result."""
    x = fresh.tensor(np.arange(4, dtype=np.float32))
    fresh.flush()
    epoch, scheduler = fresh.epoch, fresh.scheduler
    before = fresh.stats.snapshot()
    with fresh.record(label="step") as rec:
        y = wg.ops.scale(x, 2.0)
        with pytest.raises(wg.RecordingError, match=r"dev.recreate\(\) inside step, open on this thread: .*leave "
                                                    r"the `with dev.record\(\)` block first"):
            fresh.recreate()
        assert (fresh.epoch, fresh.scheduler, fresh.lost) == (epoch, scheduler, False)
        z = wg.ops.scale(x, 3.0)
        assert fresh.stats.since(before).submits == 0                      # still recorded, not run
    assert "submitted" in repr(rec) and fresh.stats.since(before).submits == 1
    np.testing.assert_array_equal(y.numpy(), [0.0, 2.0, 4.0, 6.0])
    np.testing.assert_array_equal(z.numpy(), [0.0, 3.0, 6.0, 9.0])
    fresh.recreate()                                                        # outside the block: as before
    assert fresh.epoch != epoch


def test_a_recording_open_on_another_thread_across_recreate_raises_at_its_next_call(fresh):
    """Thread B's recording was open while thread A re-created the device: B's next op call (on a tensor of the new
    device) ran at once, outside the recording, and B's block ended in DeviceError only at its submit. Now that
    call raises DeviceError naming B's recording (as would a dev.write or dev.tensor), nothing runs, and the block
    (left by it) is discarded."""
    import threading

    opened, recreated, got = threading.Event(), threading.Event(), {}

    def thread_b():
        try:
            with fresh.record(label="b-step") as rec:
                got["rec"] = rec
                opened.set()
                recreated.wait(10)
                before = fresh.stats.snapshot()
                try:
                    x = fresh.empty((4,), "f32")   # of the new device: the op call is what meets the recording
                    wg.ops.scale(x, 2.0)
                finally:
                    got["submits"] = fresh.stats.since(before).submits
        except Exception as e:   # noqa: BLE001 - the test checks it
            got["error"] = e

    b = threading.Thread(target=thread_b)
    b.start()
    opened.wait(10)
    fresh.recreate()   # A has no recording open: allowed
    recreated.set()
    b.join(10)
    assert isinstance(got.get("error"), DeviceError), got
    assert re.search(r"b-step was opened on epoch \d+, which dev.recreate\(\) replaced", str(got["error"]))
    assert got["submits"] == 0 and "discarded" in repr(got["rec"])


@pytest.mark.parametrize("how", ["destroy", "recreate"])
def test_a_buffer_released_on_another_thread_during_destroy_is_counted(fresh, how):
    """A tensor that died on another thread while dev.destroy() (or dev.recreate()) held the device lock, after the
    pool's clear(), waited in that pool's orphan deque, which no later call took in: live_buffers read 1 with
    every buffer of the device gone (0), and after a re-creation stayed one above what lives."""
    held = [fresh.tensor(np.ones(8, np.float32))]   # the device's one buffer (flush, no readback: no staging buffer)
    fresh.flush()
    assert fresh.stats.live_buffers == 1
    clear = fresh.pipelines.clear

    def clear_after_a_release_elsewhere():   # destroy calls it after pool.clear(), the lock held
        other = threading.Thread(target=held.clear)   # the tensor's last reference dies on another thread
        other.start()
        other.join()
        clear()

    fresh.pipelines.clear = clear_after_a_release_elsewhere
    getattr(fresh, how)()
    gc.collect()
    assert fresh.stats.live_buffers == 0
    if how == "recreate":
        t = fresh.tensor(np.ones(8, np.float32))   # the new epoch's one buffer
        assert fresh.stats.live_buffers == 1
        del t   # back to the pool: still a live buffer, which the next tensor of its size takes
        fresh.tensor(np.ones(8, np.float32))
        assert fresh.stats.live_buffers == 1
