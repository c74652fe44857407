"""The adapter's buffer limits as wgraph's device keeps them: a tensor within max-buffer-size and
max-storage-buffer-binding-size is made, uploaded and read back (the pool's size classes and the readback staging
buffer never round past max-buffer-size); one past them is a LimitError naming its size and the limit, before any
GPU buffer is made. A device opened with lowered limits (wgpu honours them) stands for an adapter whose limits are
not powers of two."""

import numpy as np
import pytest
import wgpu

import wgraph as wg
from wgraph.errors import GpuValueError, LimitError

LIMIT = 1_000_000   # bytes: neither limit a power of two, as on adapters that report their memory's size


def _device_with(limits: dict) -> wg.Device:
    """A device of the default adapter opened at its limits but `limits` (Device asks for the adapter's)."""
    adapter = wg.default_device().adapter   # first: the default device keeps the adapter's own limits
    real = wgpu.GPUAdapter.limits
    wgpu.GPUAdapter.limits = property(lambda adapter: {**real.fget(adapter), **limits})
    try:
        return wg.Device(adapter=adapter)
    finally:
        wgpu.GPUAdapter.limits = real


@pytest.fixture(scope="module")
def small():
    device = _device_with({"max-buffer-size": LIMIT, "max-storage-buffer-binding-size": LIMIT})
    assert (device.caps.max_buffer_size, device.caps.max_storage_binding_size) == (LIMIT, LIMIT)
    yield device
    device.destroy()


@pytest.mark.parametrize("n", [LIMIT // 4, LIMIT // 4 - 3, 900_000 // 4])
def test_a_tensor_within_the_limits_is_made_written_and_read(small, n):
    """dev.empty of 1,000,000 bytes asked the pool for a 1,048,576-byte buffer (its size class) and the readback for
    a 1,048,576-byte staging buffer: both past max-buffer-size, wgpu validation errors for a legal tensor."""
    data = (np.arange(n, dtype=np.int64) * 7 % 1001).astype(np.float32)
    t = small.tensor(data)
    assert t.nbytes <= t.buffer.size <= LIMIT
    np.testing.assert_array_equal(wg.ops.scale(t, 2.0).numpy(), data * 2)


def test_a_tensor_at_the_limit_reads_back_with_the_error_flag(small):
    """The device error flag is read with every readback: 16 bytes beside the tensor's LIMIT would pass the largest
    staging buffer, so a tensor that fills it has its flag read by itself (a GPU error still raises)."""
    data = np.arange(LIMIT // 4, dtype=np.uint32)
    t = small.tensor(data)
    wg.ops.embedding(small.tensor(np.array([5], np.uint32)), small.tensor(np.ones((2, 4), np.float32)))
    with pytest.raises(GpuValueError, match="embedding: a token id read from the GPU was 5; it must be < 2"):
        t.numpy()
    np.testing.assert_array_equal(t.numpy(), data)   # the flag was cleared


def test_past_the_limit_is_a_limit_error_before_any_buffer(small):
    before = small.stats.buffers_created
    with pytest.raises(LimitError, match=f"is {LIMIT + 4} bytes; the device binds at most {LIMIT} bytes"):
        small.empty((LIMIT // 4 + 1,), "f32")
    assert small.stats.buffers_created == before


def test_an_op_output_past_the_limit_names_the_op(small):
    """An op whose output passes the limit from small inputs (an embedding of many ids) said "tensor (...) f32 is N
    bytes" without the op: it names the output it was making, before any GPU work."""
    ids = small.tensor(np.zeros(LIMIT // 16 + 1, np.uint32))
    table = small.tensor(np.ones((2, 4), np.float32))
    before = small.stats.snapshot()
    with pytest.raises(LimitError, match=rf"tensor \({LIMIT // 16 + 1}, 4\) f32 \(embedding.out0\) is "
                                         rf"{(LIMIT // 16 + 1) * 16} bytes; the device binds at most {LIMIT} bytes"):
        wg.ops.embedding(ids, table)
    assert small.stats.since(before).dispatches == 0


def test_max_buffer_size_below_the_binding_limit_is_a_limit_error_before_any_buffer():
    """An adapter may allow smaller buffers than storage bindings: a tensor between the two passed the binding check
    and reached wgpu (the pool's 'could not make a buffer', after a GPU call, not naming the limit)."""
    device = _device_with({"max-buffer-size": LIMIT})
    try:
        assert device.caps.max_storage_binding_size > LIMIT
        before = device.stats.buffers_created
        with pytest.raises(LimitError, match=f"is {LIMIT + 4} bytes; the device makes buffers of at most {LIMIT} "):
            device.empty((LIMIT // 4 + 1,), "f32")
        assert device.stats.buffers_created == before
    finally:
        device.destroy()
