"""Concurrency (docs/concurrency.md): two programs on one device; recordings, immediate ops, readbacks and
program runs from several threads on one device are safe (one device lock serialises wgpu calls); a
recording belongs to its thread and captures only that thread's op calls."""

import sys
import threading

import attrs
import numpy as np
import pytest

import wgraph as wg
from wgraph.errors import RecordingError

from thread_runner import run_together


def _thread_keeping(fn, until: str | None = None):
    """A started thread running fn(), the dict whose "a" gets its result or the WgraphError it raised, and an Event
    set when the thread first enters a function named `until` (a profile hook of that thread alone). It replaced
    polling sys._current_frames() from the main thread, which hung a fresh clone's suite (CPython 3.11.7: py-spy
    found the main thread idle on that line for 13 minutes, the other thread waiting for the device lock)."""
    got = {}
    reached = threading.Event()

    def hook(frame, event, _arg):
        if event == "call" and frame.f_code.co_name == until:
            reached.set()
            sys.setprofile(None)

    def run():
        if until is not None:
            sys.setprofile(hook)
        try:
            got["a"] = fn()
        except wg.WgraphError as e:
            got["a"] = e
        finally:
            sys.setprofile(None)
    t = threading.Thread(target=run)
    t.start()
    return t, got, reached


def _wait_until_in(thread, reached: threading.Event, function: str, timeout=10.0):
    """Block until `thread` has entered `function` (the Event _thread_keeping(..., until=function) sets)."""
    if not reached.wait(timeout):
        raise AssertionError(f"{thread.name} never reached {function}()")


def _decode_graph(name, capacity=32):
    g = wg.Graph(name)
    q = g.input("q", (1, 2, 16), "f32")
    k, v = g.input("k", (1, 1, 16), "f32"), g.input("v", (1, 1, 16), "f32")
    pos, n = g.input("pos", (1,), "u32"), g.input("kv_len", (1,), "u32")
    kc, vc = g.state("kc", (capacity, 1, 16), "f32"), g.state("vc", (capacity, 1, 16), "f32")
    wg.ops.kv_append((kc, vc), k, v, pos)
    g.output("out", wg.ops.attention(q, kc, vc, causal=True, kv_len=n))
    return g


def _steps(rng, n):
    return [dict(q=rng.standard_normal((1, 2, 16)).astype(np.float32), k=rng.standard_normal((1, 1, 16)).astype(np.float32),
                 v=rng.standard_normal((1, 1, 16)).astype(np.float32), pos=t, kv_len=t + 1) for t in range(n)]


def _solo(dev, steps):
    prog = _decode_graph("solo").compile(dev)
    return [prog.run(**s)["out"].numpy() for s in steps]


def test_two_programs_on_one_device_interleaved(dev, rng):
    a_steps, b_steps = _steps(rng, 12), _steps(rng, 12)
    want_a, want_b = _solo(dev, a_steps), _solo(dev, b_steps)
    a, b = _decode_graph("a").compile(dev), _decode_graph("b").compile(dev)
    for t in range(12):  # each keeps its own state (kv cache), buffers and uniform arena
        got_a = a.run(**a_steps[t])["out"].numpy()
        got_b = b.run(**b_steps[t])["out"].numpy()
        assert got_a.tobytes() == want_a[t].tobytes() and got_b.tobytes() == want_b[t].tobytes(), t


def test_programs_run_from_two_threads(dev, rng):
    runs = [_steps(rng, 10) for _ in range(2)]
    want = [_solo(dev, s) for s in runs]
    progs = [_decode_graph(f"p{i}").compile(dev) for i in range(2)]
    got = [[], []]

    def work(i):
        for s in runs[i]:
            got[i].append(progs[i].run(**s)["out"].numpy())
    run_together(2, work)
    for i in range(2):
        assert [x.tobytes() for x in got[i]] == [x.tobytes() for x in want[i]]


def test_recordings_on_two_threads_capture_their_own_ops(dev):
    before = dev.stats.submits
    results = {}

    def work(i):
        x = dev.tensor(np.full(64, i + 1, np.float32))
        for rep in range(20):
            with dev.record() as rec:
                y = x
                for _ in range(i + 3):
                    y = wg.ops.scale(y, 2.0)
                assert len(rec.items) == i + 3      # nothing from the other thread
            assert y.numpy()[0] == (i + 1) * 2.0 ** (i + 3)
        results[i] = True
    run_together(2, work)
    assert results == {0: True, 1: True}
    assert dev.stats.submits - before >= 2 * 20   # one submit per recording (+ readbacks)


def test_immediate_ops_and_reads_from_four_threads(dev, rng):
    q = rng.standard_normal((3, 4, 16)).astype(np.float32)
    k = rng.standard_normal((9, 2, 16)).astype(np.float32)
    want = wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(k), causal=True).numpy()

    def work(i):
        Q, K = dev.tensor(q), dev.tensor(k)
        for _ in range(15):
            got = wg.ops.attention(Q, K, K, causal=True).numpy()
            assert got.tobytes() == want.tobytes()
            assert wg.ops.add(Q, Q).numpy().tobytes() == (q + q).tobytes()
    run_together(4, work)


def test_op_calls_of_another_thread_are_not_recorded(dev):
    x = dev.tensor(np.ones(8, np.float32))
    other = {}
    with dev.record() as rec:
        wg.ops.scale(x, 2.0)
        t = threading.Thread(target=lambda: other.setdefault("y", wg.ops.scale(x, 3.0).numpy()))
        t.start()
        t.join()
        assert len(rec.items) == 1
    assert other["y"].tolist() == [3.0] * 8   # ran immediately on its own thread


def test_a_recording_refuses_another_thread(dev):
    rec = dev.record()
    caught = []

    def use():
        with pytest.raises(RecordingError, match="belongs to thread"):
            rec.append(None)
        caught.append(True)
    t = threading.Thread(target=use)
    t.start()
    t.join()
    assert caught == [True]
    rec.discard()


def test_a_tensor_dying_on_another_thread_never_waits_for_the_device_lock():
    """A tensor's finalizer runs on whatever thread the garbage collector runs (a compile worker, while the
    thread that started the compile holds the device lock and waits for it: a deadlock). Its buffer goes back
    without waiting for the lock, and the next allocation takes it in."""
    dev = wg.Device()
    t = dev.empty((256,), "f32")
    buf = t.buffer
    held, go = threading.Event(), threading.Event()

    def holder():
        with dev.lock:
            held.set()
            go.wait(30)

    h = threading.Thread(target=holder, daemon=True)
    h.start()
    held.wait(30)
    finished = threading.Event()

    def drop():
        nonlocal t
        del t
        finished.set()

    threading.Thread(target=drop, daemon=True).start()
    try:
        assert finished.wait(10), "a finalizer waited for the device lock"
    finally:
        go.set()
        h.join(30)
    assert dev.empty((256,), "f32").buffer is buf   # back in the pool: the next allocation of its size takes it
    dev.destroy()


def test_an_op_call_in_flight_across_recreate_raises_and_leaves_the_new_device_alone():
    """Thread A's op call passes its epoch check, then waits for the device lock (its output's allocation) while
    another thread re-creates the device. It must raise DeviceError, not queue its old-epoch inputs on the new
    device: they made the next flush raise on whichever thread came next and poisoned that thread's own fresh
    tensors (their writes were pending behind A's op)."""
    dev = wg.Device()
    x, y = dev.tensor(np.ones(16, np.float32)), dev.tensor(np.ones(16, np.float32))
    wg.ops.add(x, y).numpy()   # the template is cached: a repeated call checks epochs once, before it allocates
    with dev.lock:
        t, got, reached = _thread_keeping(lambda: wg.ops.add(x, y), until="alloc")
        _wait_until_in(t, reached, "alloc")   # A waits for the lock in its output's allocation
        dev.recreate()
    t.join(30)
    assert isinstance(got["a"], wg.DeviceError), got["a"]
    p, q = dev.tensor(np.full(16, 2, np.float32)), dev.tensor(np.full(16, 3, np.float32))
    assert wg.ops.add(p, q).numpy().tolist() == [5.0] * 16
    dev.destroy()


def test_an_allocation_that_waited_for_a_destroy_raises_device_error():
    """dev.empty on thread A checked that the device was alive, then waited for the lock while another thread
    destroyed the device: it took the closed pool's buffer from the dead device and raised LimitError ("could not
    make a buffer of 64 bytes ... Parent device is lost"). It raises DeviceError, as any call after a destroy."""
    dev = wg.Device()
    with dev.lock:
        t, got, reached = _thread_keeping(lambda: dev.empty((16,), "f32"), until="alloc")
        _wait_until_in(t, reached, "alloc")
        dev.destroy()
    t.join(30)
    assert isinstance(got["a"], wg.DeviceError), got["a"]


def test_stale_items_run_in_a_recording_fail_at_the_call_not_another_threads_ops():
    """dev.run(items captured before dev.recreate()) inside a recording was refused only when the recording
    submitted, a submit that had taken the other threads' pending immediate ops in front of it: thread B's valid
    op then raised RecordingError ("recording #n never ran"). The items are checked at the call, as outside one."""
    dev = wg.Device()
    x = dev.tensor(np.ones(4, np.float32))
    with dev.record() as rec:
        wg.ops.scale(x, 2.0)
        items = list(rec.items)
    dev.sync()
    dev.recreate()
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("y", wg.ops.scale(dev.tensor(np.ones(4, np.float32)), 3.0)))
    t.start()
    t.join()   # B's op waits in the pending list
    with pytest.raises(wg.DeviceError, match="a captured item of another device or of epoch"):
        with dev.record():
            dev.run(items)
    assert got["y"].numpy().tolist() == [3.0] * 4
    dev.destroy()


def test_a_kernel_report_is_raised_once_by_the_first_check_on_any_thread(dev):
    """The device error flag is the device's (docs/concurrency.md): thread A's kv_append at a GPU position past
    the cache is raised by the next readback on whatever thread makes it (here B's read of its own tensor),
    once; A's own check after it finds nothing."""
    dev.check_errors()
    kc, vc = dev.tensor(np.zeros((2, 1, 4), np.float32)), dev.tensor(np.zeros((2, 1, 4), np.float32))
    k, pos = dev.tensor(np.ones((1, 1, 4), np.float32)), dev.tensor(np.array([5], np.uint32))
    x = dev.tensor(np.arange(4, dtype=np.float32))
    t = threading.Thread(target=lambda: wg.ops.kv_append((kc, vc), k, k, pos))
    t.start()
    t.join()
    caught = []

    def read():
        with pytest.raises(wg.GpuValueError, match=r"kv_append: .* was 5; it must be < 2"):
            x.numpy()
        caught.append(True)
    b = threading.Thread(target=read)
    b.start()
    b.join()
    assert caught == [True]
    dev.check_errors()   # raised once: A's check after B's finds nothing
    assert x.numpy().tolist() == [0, 1, 2, 3]


def test_a_template_captured_across_recreate_is_not_cached_for_the_new_device(monkeypatch):
    """Thread A captures an op call (its encode binds the device error flag) while thread B re-creates the device
    between A's last check and the template cache: the template, holding old-epoch buffers, went into the new
    epoch's cache, and every later call of that op and shape, on fresh tensors, raised wgpu's raw
    GPUValidationError ("Device ... of Buffer ... doesn't match Device"). A template is cached only in the epoch
    its tensors were checked in."""
    attention_module = sys.modules["wgraph.ops.attention"]
    original = attention_module.ATTENTION
    encoded, go = threading.Event(), threading.Event()

    def encode(ctx, params, inputs, outputs):
        dispatches = original.encode(ctx, params, inputs, outputs)
        encoded.set()
        go.wait(30)   # B re-creates the device here
        return dispatches
    monkeypatch.setattr(attention_module, "ATTENTION", attrs.evolve(original, encode=encode))
    dev = wg.Device()
    q, k = np.ones((1, 2, 8), np.float32), np.ones((4, 1, 8), np.float32)

    def call():
        return wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(k), causal=True,
                                kv_len=dev.tensor(np.array([4], np.uint32)))
    t, got, _ = _thread_keeping(call)
    assert encoded.wait(30)
    dev.recreate()
    go.set()
    t.join(30)
    assert isinstance(got["a"], wg.DeviceError), got["a"]
    monkeypatch.setattr(attention_module, "ATTENTION", original)
    assert call().numpy().tolist() == [[[1.0] * 8] * 2]
    dev.destroy()


def test_a_write_crossing_recreate_raises_and_leaves_the_new_device_alone():
    """dev.write checks its tensor, converts the data (here a slow __array__), then queues: when another thread
    re-created the device in between, the write returned as if done and joined the new device's pending ops with
    the old buffer; thread B's valid op then raised DeviceError ("write tensor: a captured item of ... epoch 1")."""
    dev = wg.Device()
    x = dev.tensor(np.zeros(4, np.float32))
    inside, go = threading.Event(), threading.Event()

    class Slow:
        def __array__(self, dtype=None, copy=None):
            inside.set()
            go.wait(30)
            return np.ones(4, np.float32)
    t, got, _ = _thread_keeping(lambda: dev.write(x, Slow()) or "returned")
    assert inside.wait(30)
    dev.recreate()
    y = wg.ops.scale(dev.tensor(np.full(4, 2, np.float32)), 1.0)   # waits in the new device's pending list
    go.set()
    t.join(30)
    assert isinstance(got["a"], wg.DeviceError), got["a"]
    assert y.numpy().tolist() == [2.0] * 4
    dev.destroy()


def test_flush_fence_and_check_errors_after_another_threads_destroy_raise():
    """Thread A queues ops; thread B destroys the device. A's dev.flush() returned as if its ops were sent,
    dev.fence() returned a token and dev.check_errors() said nothing was wrong: each raises DeviceError, as
    docs/concurrency.md promises for every call after a destroy (the ops died with the device)."""
    dev = wg.Device()
    x = dev.tensor(np.ones(4, np.float32))
    y = wg.ops.scale(x, 2.0)   # pending
    t = threading.Thread(target=dev.destroy)
    t.start()
    t.join()
    for call in (dev.flush, dev.fence, dev.check_errors):
        with pytest.raises(wg.DeviceError, match="is lost or destroyed"):
            call()
    with pytest.raises(wg.DeviceError):
        y.numpy()


def test_a_profiled_recording_times_only_its_own_ops(dev):
    """Thread B's immediate ops were pending when thread A's record(profile=True) submitted: they went into its
    submit, in front, and A's profile of one silu listed B's 3 scale and 3 add (and their time in its span)."""
    if not dev.caps.has_timestamps:
        pytest.skip("no timestamp queries")
    x = dev.tensor(np.ones(64, np.float32))

    def other():
        for _ in range(3):
            wg.ops.add(x, wg.ops.scale(x, 5.0))
    t = threading.Thread(target=other)
    t.start()
    t.join()
    with dev.record(profile=True) as rec:
        y = wg.ops.silu(x)
    assert [(r.label, r.count) for r in rec.profile().rows] == [("silu", 1)]
    assert abs(y.numpy()[0] - 1 / (1 + np.exp(-1.0))) < 1e-6


def test_a_recording_that_fails_to_submit_leaves_other_threads_pending_ops_to_run(monkeypatch):
    """A recording's submit takes the pending immediate ops (thread B's here) in front of its items. When it failed
    (here a kernel the driver cannot compile; seen for real: a recording whose writes after its first op passed
    128 MB raised LimitError for its upload buffer), B's valid op was marked unusable ("recording #n never ran").
    Now only the recording's own ops are; B's wait for the next flush and run."""
    dev = wg.Device()
    x = dev.tensor(np.ones(4, np.float32))
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("y", wg.ops.scale(dev.tensor(np.full(4, 2, np.float32)), 3.0)))
    t.start()
    t.join()   # B's op waits in the pending list
    warm = dev.pipelines.warm

    def failing(kernels, *a, **k):
        kernels = list(kernels)
        if any(kernel.name.startswith("silu") for kernel in kernels):
            raise wg.PlanError("the driver could not compile silu")
        return warm(kernels, *a, **k)
    monkeypatch.setattr(dev.pipelines, "warm", failing)
    with pytest.raises(wg.PlanError, match="could not compile"):
        with dev.record():
            z = wg.ops.silu(x)
    assert got["y"].numpy().tolist() == [6.0] * 4
    with pytest.raises(RecordingError, match="never ran"):
        z.numpy()
    dev.destroy()


def test_threads_first_using_the_registry_at_once_share_one_load():
    """registry() is functools.cache'd, which lets every thread that misses at once run the function: threads
    making their first op call together each loaded the whole registry (0.4 s each, one GIL) and kept Kernel
    objects of their own. A fresh process (the registry not loaded yet) and four threads asking at once."""
    import subprocess

    code = ("import threading\n"
            "from wgraph.kernels.registry import registry\n"
            "got, barrier = [], threading.Barrier(4)\n"
            "def run():\n"
            "    barrier.wait()\n"
            "    got.append(registry())\n"
            "ts = [threading.Thread(target=run) for _ in range(4)]\n"
            "for t in ts: t.start()\n"
            "for t in ts: t.join()\n"
            "print(len(got), len({id(r) for r in got}), len({id(r['scale_f32']) for r in got}))\n")
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                         cwd=root)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["4", "1", "1"]
