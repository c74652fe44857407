"""The submission engine: immediate vs recorded, batching counts, uniform reuse, indirect dispatch,
failed recordings, staging reuse, buffer pool, profiling, and errors raised before GPU work."""

import numpy as np
import pytest

import wgraph as wg
from wgraph.scheduler.pool import size_class

from kernel_support import skip_unless_f16


def test_immediate_result_matches_numpy(dev, rng):
    a = rng.standard_normal(1000).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    got = wg.ops.add(wg.ops.scale(dev.tensor(a), 3.0), dev.tensor(b)).numpy()
    # two separate kernels, each one IEEE f32 rounding: the same math in f32 numpy is bit-identical
    np.testing.assert_array_equal(got, (a * np.float32(3.0)) + b)
    exact = a.astype(np.float64) * 3.0 + b
    assert np.all(np.abs(got - exact) <= 2 * np.finfo(np.float32).eps * (3 * np.abs(a) + np.abs(b)))


def test_f16(dev, rng):
    skip_unless_f16(dev)
    a = rng.standard_normal(37).astype(np.float16)
    np.testing.assert_array_equal(wg.ops.scale(dev.tensor(a), 2.0).numpy(), a * np.float16(2))


def _chain(x, n):
    for i in range(n):
        x = wg.ops.scale(x, 1.0 + (i % 3) * 0.01)
    return x


def test_recorded_equals_immediate_and_batches(dev, rng):
    x = dev.tensor(rng.standard_normal(513).astype(np.float32))
    immediate = _chain(x, 100).numpy()
    before = dev.stats.snapshot()
    with dev.record():
        y = _chain(x, 100)
    delta = dev.stats.since(before)
    assert (delta.submits, delta.compute_passes, delta.dispatches) == (1, 1, 100)
    # three distinct factors -> three uniform slices, uploaded in one arena write
    assert delta.uniform_bytes_written <= 3 * dev.caps.min_uniform_offset_alignment
    assert y.numpy().tobytes() == immediate.tobytes()


def test_explicit_submit_and_finished_recording_raises(dev):
    x = dev.tensor(np.ones(4, np.float32))
    rec = dev.record()
    with rec:
        y = wg.ops.scale(x, 2.0)
        rec.submit()
    np.testing.assert_array_equal(y.numpy(), [2, 2, 2, 2])
    with pytest.raises(wg.RecordingError, match="already submitted"):
        rec.submit()
    with pytest.raises(wg.RecordingError, match="already submitted"):
        with rec:
            pass


def test_read_inside_recording_of_pending_output_raises(dev):
    x = dev.tensor(np.ones(4, np.float32))
    with dev.record():
        y = wg.ops.scale(x, 2.0)
        with pytest.raises(wg.RecordingError, match="written by the open recording"):
            y.numpy()
        np.testing.assert_array_equal(x.numpy(), [1, 1, 1, 1])  # not written by it: fine


def test_failed_recording_submits_nothing_and_frees(dev):
    x = dev.tensor(np.ones(64, np.float32))
    with dev.record():  # warm the pool with the buffers this shape needs
        _chain(x, 5)
    before = dev.stats.snapshot()
    free_before = dev.pool.free_count
    with pytest.raises(ZeroDivisionError):
        with dev.record():
            _chain(x, 5)
            1 / 0
    delta = dev.stats.since(before)
    assert delta.submits == 0 and delta.dispatches == 0
    assert delta.buffers_created == 0
    assert dev.pool.free_count == free_before  # the 5 outputs went back to the pool


def test_uniform_cache_reuses_buffers(dev):
    x = dev.tensor(np.ones(8, np.float32))
    y = wg.ops.scale(x, 7.25)
    dev.flush()
    before = dev.stats.snapshot()
    for _ in range(5):
        wg.ops.scale(x, 7.25, out=y)
        dev.flush()  # each op its own submit, as a read after it would make
    delta = dev.stats.since(before)
    assert delta.buffers_created == 0 and delta.uniform_bytes_written == 0 and delta.bind_groups_created == 0
    assert delta.submits == 5


def test_indirect_dispatch_equals_direct(dev, rng):
    a = rng.standard_normal(3000).astype(np.float32)
    x = dev.tensor(a)
    groups = -(-3000 // 256)
    args = dev.tensor(np.array([groups, 1, 1], np.uint32))
    direct = wg.ops.scale(x, 0.5).numpy()
    np.testing.assert_array_equal(wg.ops.scale(x, 0.5, indirect=args).numpy(), direct)
    with dev.record():
        y = wg.ops.scale(x, 0.5, indirect=args)
    np.testing.assert_array_equal(y.numpy(), direct)
    # the GPU reads the counts at dispatch time: one workgroup covers only the first 256 elements
    dev.write(args, np.array([1, 1, 1], np.uint32))
    z = wg.ops.scale(x, 0.5, indirect=args)
    np.testing.assert_array_equal(z.numpy()[:256], direct[:256])


def test_staging_buffer_is_reused(dev):
    x = dev.tensor(np.ones(100, np.float32))
    x.numpy()
    before = dev.stats.snapshot()
    for _ in range(5):
        x.numpy()
    delta = dev.stats.since(before)
    assert delta.staging_buffers_created == 0 and delta.readbacks == 5


def test_pool_reuses_dead_tensors(dev):
    for _ in range(3):
        dev.tensor(np.ones(1000, np.float32))
    before = dev.stats.snapshot()
    for _ in range(20):
        dev.tensor(np.ones(1000, np.float32))
    assert dev.stats.since(before).buffers_created == 0


def test_size_class_bounds():
    for n in [1, 15, 16, 17, 255, 257, 1000, 4096, 4097, 10**6]:
        c = size_class(n)
        assert c >= n and c % 16 == 0 and (n < 256 or c <= 1.25 * n + 16)


def test_profile_table_by_label(dev):
    x = dev.tensor(np.ones(4096, np.float32))
    with dev.record(profile=True) as rec:
        y = wg.ops.scale(x, 2.0)
        wg.ops.add(y, y)
        wg.ops.scale(y, 3.0)
    before = dev.stats.snapshot()
    table = rec.profile()
    d = dev.stats.since(before)
    assert d.readbacks == 1 and d.buffers_destroyed == 2   # the stamps' readback counted, their buffers destroyed
    assert rec.profile().rows == table.rows and dev.stats.since(before).readbacks == 1   # a second call reuses them
    assert {r.label: r.count for r in table.rows} == {"scale": 2, "add": 1}
    assert all(r.total_us >= 0 for r in table.rows)
    assert "scale" in str(table)
    # the span runs from the first dispatch's start to the last one's end, so it covers every dispatch
    assert table.span_us >= max(r.total_us / r.count for r in table.rows) > 0 or not table.inside_passes
    assert table.span_us >= sum(r.total_us for r in table.rows) * 0.999 or not table.inside_passes


def test_reshape_is_a_view(dev):
    x = dev.tensor(np.arange(12, dtype=np.float32))
    v = x.reshape(3, -1)
    assert v.shape == (3, 4) and v.buffer is x.buffer
    np.testing.assert_array_equal(v.numpy(), np.arange(12).reshape(3, 4))
    with pytest.raises(wg.ShapeError, match=r"Tensor.reshape: cannot view \(12,\)"):
        x.reshape(5, 2)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_write_into_a_view_ending_mid_word_is_refused(dev, dtype):
    """A view of an odd number of 16-bit elements ends inside a 4-byte word that holds the next element too; queue
    writes and copies go in whole words, so dev.write zeroed the element after the view (row 1's first value read
    back 0, not 4), immediately, pending or recorded. Refused before any GPU work, naming the view; a view that
    ends on a word, and the whole tensor, write as before."""
    if dtype == "f16" and not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    rows = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    big = dev.tensor(rows, dtype=dtype)
    _no_gpu_work(dev, lambda: dev.write(big.prefix(1), [[7, 8, 9]]), wg.ShapeError,
                 r"dev.write into Tensor\(shape=\(1, 3\).*ends inside a 4-byte word .* would overwrite the element "
                 r"after it")
    with dev.record():
        with pytest.raises(wg.ShapeError, match="ends inside a 4-byte word"):
            dev.write(big.reshape(6).prefix(5), [7, 8, 9, 10, 11])
    np.testing.assert_array_equal(big.numpy(), rows)
    dev.write(big.reshape(6).prefix(4), [7, 8, 9, 10])
    np.testing.assert_array_equal(big.numpy(), [[7, 8, 9], [10, 5, 6]])
    dev.write(big, rows.tolist())
    np.testing.assert_array_equal(big.numpy(), rows)
    odd = dev.tensor(np.ones(3, np.float32), dtype=dtype)
    dev.write(odd.reshape(1, 3), [[7, 8, 9]])   # the whole of an odd-sized tensor: its last word's pad is no data
    np.testing.assert_array_equal(odd.numpy(), [7, 8, 9])


# ---- errors before any GPU work ----

def _no_gpu_work(dev, fn, exc, match):
    before = dev.stats.snapshot()
    with pytest.raises(exc, match=match):
        fn()
    delta = dev.stats.since(before)
    assert delta.submits == 0 and delta.dispatches == 0


def test_wrong_dtype(dev):
    x = dev.tensor(np.ones(4, np.uint32))
    _no_gpu_work(dev, lambda: wg.ops.scale(x, 2.0), wg.DtypeError, "scale has no kernel for .*u32")
    f = dev.tensor(np.ones(4, np.float32))
    other = "f16" if dev.caps.has_f16 else "bf16"   # a float dtype other than f32 that the device has
    h = dev.tensor(np.ones(4, np.float32), other)
    _no_gpu_work(dev, lambda: wg.ops.add(f, h), wg.DtypeError, f"dtypes f32 and {other} differ")
    _no_gpu_work(dev, lambda: dev.tensor(np.ones(3, np.int64)), wg.DtypeError, "numpy dtype int64")


def test_wrong_shape(dev):
    a = dev.tensor(np.ones(4, np.float32))
    b = dev.tensor(np.ones(5, np.float32))
    _no_gpu_work(dev, lambda: wg.ops.add(a, b), wg.ShapeError, r"shapes \(4,\) and \(5,\) do not broadcast")
    _no_gpu_work(dev, lambda: wg.ops.scale(a, 2.0, out=b), wg.ShapeError, r"out= has shape \(5,\)")


def test_foreign_device(dev):
    other = wg.Device()
    a = dev.tensor(np.ones(4, np.float32))
    b = other.tensor(np.ones(4, np.float32))
    _no_gpu_work(dev, lambda: wg.ops.add(a, b), wg.DeviceError, "inputs live on different devices")
    _no_gpu_work(dev, lambda: wg.ops.scale(a, 1.0, out=b), wg.DeviceError, "belongs to another device")


def test_aliasing_read_and_write(dev):
    a = dev.tensor(np.ones(4, np.float32))
    _no_gpu_work(dev, lambda: wg.ops.scale(a, 2.0, out=a), wg.AliasingError,
                 r"bound to y \(read_write\) and to x")


def test_two_outputs_one_buffer_is_refused_after_a_cached_call(dev, rng):
    """add_rmsnorm(..., out=(o, o)) was refused on a first call, but once a call with two tensors had cached the
    template, the cached path checked the outputs against the inputs only: it ran with the sum and the norm both
    written into o, silently. Refused on every call now, before any GPU work, and o keeps what it held."""
    x, r = rng.standard_normal((2, 8)).astype(np.float32), rng.standard_normal((2, 8)).astype(np.float32)
    X, R, W = dev.tensor(x), dev.tensor(r), dev.tensor(np.ones(8, np.float32))
    s64 = x.astype(np.float64) + r
    s, y = wg.ops.add_rmsnorm(X, R, W, out=(dev.empty((2, 8)), dev.empty((2, 8))))   # caches the template
    np.testing.assert_allclose(s.numpy(), s64, atol=1e-6, rtol=0)
    np.testing.assert_allclose(y.numpy(), s64 / np.sqrt((s64**2).mean(-1, keepdims=True) + 1e-6), atol=1e-5, rtol=0)
    o = dev.tensor(np.full((2, 8), 5, np.float32))
    for out in ((o, o), (o, o.reshape(16).reshape(2, 8))):
        _no_gpu_work(dev, lambda: wg.ops.add_rmsnorm(X, R, W, out=out), wg.AliasingError,
                     r"^add_rmsnorm: out\[0\] and out\[1\] are one buffer")
    np.testing.assert_array_equal(o.numpy(), 5)


def test_aliasing_error_names_the_op_and_its_arguments(dev):
    """The kernel's check names its WGSL bindings (`y`, `step_buf`); the error says first which of the caller's
    arguments are one buffer, by the op's own names (views of one tensor included), read-only pairs left out."""
    x = dev.tensor(np.ones((2, 8), np.float32))
    w = dev.tensor(np.ones((8, 8), np.float32))
    _no_gpu_work(dev, lambda: wg.ops.linear(x, w, out=x.reshape(16).reshape(2, 8)), wg.AliasingError,
                 r"^linear: x and out= are one buffer .*\(kernel gemv\w*: one buffer is bound to y \(read_write\) and "
                 r"to x\)")
    step = dev.tensor(np.zeros(1, np.uint32))
    _no_gpu_work(dev, lambda: wg.ops.sample(dev.tensor(np.ones((1, 5), np.float32)), step=step, out=step),
                 wg.AliasingError, r"^sample: step and out= are one buffer")
    q, kv = dev.tensor(np.ones((4, 2, 8), np.float32)), dev.tensor(np.ones((8, 2, 8), np.float32))
    _no_gpu_work(dev, lambda: wg.ops.attention(q, kv, kv, causal=True, out=q), wg.AliasingError,
                 r"^attention: q and out= are one buffer \(")   # k and v, one buffer read twice, are fine
    g = wg.Graph("alias")
    s = g.state("s", (2, 8))
    with pytest.raises(wg.AliasingError, match=r"graph 'alias', node 'scale_1' \(scale\): x \('s'\) and out= \('s'\) "
                                               r"are one buffer"):
        wg.ops.scale(s, 2.0, out=s)   # refused as the node is added, as the immediate op at its call


def test_workgroups_above_limit(dev):
    from wgraph.ops.core import EncodeContext

    ctx = EncodeContext(dev)
    a = dev.tensor(np.ones(4, np.float32))
    b = dev.empty((4,), "f32")
    limit = dev.caps.max_workgroups_per_dim
    with pytest.raises(wg.LimitError, match=f"exceed the device limit of {limit}"):
        ctx.dispatch("scale_f32", uniforms={"n": 4, "alpha": 1.0}, bindings={"x": a, "y": b},
                     workgroups=(limit + 1, 1, 1))
    assert ctx.grid(3 * limit)[0] <= limit  # grid() splits large counts into two dimensions


def test_large_tensor_uses_2d_grid(dev):
    n = 256 * 65535 + 1000  # more workgroups than one dimension allows
    x = dev.tensor(np.ones(n, np.float32))
    y = wg.ops.scale(x, 2.0).numpy()
    assert y.shape == (n,) and np.all(y == 2.0)


def test_device_lost_and_recreated():
    d = wg.Device()
    x = d.tensor(np.ones(4, np.float32))
    epoch = d.epoch
    d.destroy()
    with pytest.raises(wg.DeviceError, match="is lost or destroyed"):
        wg.ops.scale(x, 2.0)
    d.recreate()
    assert d.epoch != epoch
    with pytest.raises(wg.DeviceError, match="re-created"):
        wg.ops.scale(x, 2.0)
    np.testing.assert_array_equal(wg.ops.scale(d.tensor(np.ones(4, np.float32)), 2.0).numpy(), [2, 2, 2, 2])


def test_tensors_collected_in_a_garbage_cycle_never_pool_a_released_buffer():
    """A tensor and its wgpu buffer that die together in a reference cycle (an exception's traceback holding
    an op call's frames does this) are finalized in any order, so wgpu-py may release the native buffer before
    or after the tensor hands it back: the pool must never hand such a buffer out again."""
    import gc

    dev = wg.Device()

    class Holder:
        pass

    for _ in range(20):
        h = Holder()
        h.t, h.me = dev.empty((64,), "f32"), h
        del h
    gc.collect()
    for i in range(20):  # the same size class: served from the free list
        x = dev.tensor(np.full(64, float(i), np.float32))
        assert x.buffer._internal is not None and x.numpy().tolist() == [float(i)] * 64
    dev.destroy()
